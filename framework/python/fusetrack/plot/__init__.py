"""The plots that the ``fusetrack`` command line draws, one module per command's output (matplotlib
and NumPy only: the compiled module is not needed).

Each module draws figures (``matplotlib.figure.Figure``, no pyplot state) and writes them with
``write_plots(...)``, which returns the files written; ``python3 -m fusetrack.plot.MODULE`` does the
same from a shell:

- ``da``: ``fusetrack da -o DIR``: survival map, DA against angle and against turns (DIR)
- ``optics``: ``fusetrack optics --twiss-table``: beta functions and dispersion along the ring
- ``collective``: ``fusetrack track --monitor``: bunch length, emittances, profiles
- ``footprint``: ``fusetrack spacecharge footprint``: the tune footprint over resonance lines
- ``collide``: ``fusetrack collide -o DIR``: luminosity, centroids, emittances, spectra
- ``fma``: ``fusetrack fma -o DIR``: frequency map in tune and amplitude space, coloured by tune diffusion
"""
