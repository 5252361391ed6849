// Bunch trains as the slice-moment elements declare them (TransverseWake and TransverseDamper with
// n_bunches > 1 and bunch_spacing, fusetrack/slice_wakes.h): the train a lattice declares, a train made of
// copies of one bunch, and the per-bunch centroids and emittances from integer moment sums (the same numbers
// for any particle order, thread count and MPI rank count). `fusetrack track --bunches` and the Python module
// (fusetrack.declared_train, Particles.train, fusetrack.bunch_moments) use these.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fusetrack/lattice.h"
#include "fusetrack/particles.h"

namespace ft {

class Communicator;

/// A train: bunch b (0 leading) sits at zeta - b spacing.
struct BunchTrain {
  int bunches = 1;
  double spacing = 0.0;     // [m] of zeta between consecutive bunches
  double centre = 0.0;      // [m] the middle of bunch 0's cuts in the declaring element, else 0
  std::string declared_by;  // the element declaring the train ("" when none does)
};

/// The train that the lattice's slice-moment elements declare (the last one with n_bunches > 1), else one
/// bunch. Only the elements' models are built (their wake tables are not read): the element's own checks of
/// its fields apply (errors name the lattice file, the element and the field); the solver's checks against
/// the ring (a train longer than the ring) come when the tracker builds it.
BunchTrain declared_train(const Lattice& lattice);

/// `bunches` copies made by bunch(b), bunch b shifted by -b spacing [m] in zeta, appended in bunch order.
Particles make_bunch_train(int bunches, double spacing, const std::function<Particles(int)>& bunch);

/// Per-bunch moments of the alive particles of a train (index b: bunch b; fusetrack/monitor.h BunchMoments
/// are the moments of one whole bunch).
struct TrainMoments {
  std::vector<double> macroparticles;
  std::vector<std::array<double, 6>> mean;  // [bunch][x px y py zeta delta]
  std::vector<double> emittance_x;          // [m] geometric rms, sqrt(<x^2><px^2> - <x px>^2) (central)
  std::vector<double> emittance_y;
  uint64_t out_of_range = 0;  // alive particles beyond the declared ranges, left out
};

/// The moments of `particles` per bunch of `train` from exact integer sums (SliceMomentReducer): bunch b holds
/// the particles with zeta within half a spacing of centre - b spacing (one bunch: |zeta - centre| < 0.5 m,
/// the spacing unused). Declared ranges: |x|, |y| < 0.1 m,
/// |px|, |py| < 0.01, |delta| < 0.1; particles beyond are counted in out_of_range and left out.
/// `total_particles`: the macroparticles of the whole train (all ranks); `comm`: the integers are summed over
/// its ranks first (null: this process's particles only).
TrainMoments bunch_moments(const Particles& particles, const BunchTrain& train, size_t total_particles,
                           Communicator* comm = nullptr, int threads = 0);

}  // namespace ft
