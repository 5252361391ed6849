"""Lattices from files and dicts, elements read and written by name, the registry, plugins, and
C++ errors raised with the command line's messages."""
import json
import os
import re

import numpy as np
import pytest

import fusetrack as ft
from conftest import BUILD_DIR, SOURCE_DIR, assert_bitwise_equal, lattice_path, run_cli


def test_from_file_reads_the_lattice(ring):
    doc = json.load(open(lattice_path("sextupole_rf_ring.json")))
    assert ring.reference["p0c"] == doc["reference"]["p0c"]
    assert ring.reference["mass0"] == doc["reference"]["mass0"]
    assert set(ring.element_names) == set(doc["elements"])
    assert len(ring) == len(ring.sequence)
    assert ring.source_file == lattice_path("sextupole_rf_ring.json")
    # the circumference is the sum of the thick elements' lengths along the sequence
    lengths = {n: e.get("length", 0.0) for n, e in doc["elements"].items()}
    assert ring.circumference == pytest.approx(sum(lengths[n] for n in ring.sequence), rel=1e-12)
    assert ring.s[0] == 0.0 and np.all(np.diff(ring.s) >= 0)


def test_dict_round_trip(ring):
    d = ring.to_dict()
    again = ft.Lattice.from_dict(d)
    assert again.to_dict() == d
    assert again.sequence == ring.sequence
    assert again.circumference == ring.circumference


def test_element_fields_read_and_written(ring):
    doc = json.load(open(lattice_path("sextupole_rf_ring.json")))
    sd = ring["sd"]
    assert sd.type == "Multipole" and sd.name == "sd"
    knl = sd["knl"]
    assert isinstance(knl, np.ndarray)
    assert list(knl[: len(doc["elements"]["sd"]["knl"])]) == doc["elements"]["sd"]["knl"]
    sd["knl"] = [0.0, 0.0, -3.0]
    assert sd["knl"][2] == -3.0
    assert ring.to_dict()["elements"]["sd"]["knl"][2] == -3.0
    d = ring["d"]
    d["length"] = 2.5
    assert ring["d"]["length"] == 2.5
    # s positions and the circumference follow
    assert ring.circumference == pytest.approx(sum(2.5 if n == "d" else ring[n].fields().get("length", 0.0)
                                                   for n in ring.sequence), rel=1e-12)
    assert "sd" in ring and "nope" not in ring


def test_field_errors_name_file_element_and_field(ring):
    path = lattice_path("sextupole_rf_ring.json")
    with pytest.raises(ft.InputError) as e:
        ring["sd"]["kn1"] = 1.0
    assert str(e.value).startswith(f"{path}: element 'sd' (Multipole), field 'kn1': Multipole has no field 'kn1'")
    with pytest.raises(ft.InputError) as e:
        ring["d"]["length"] = float("nan")
    assert f"{path}: element 'd' (Drift), field 'length'" in str(e.value)
    with pytest.raises(ft.InputError) as e:
        ring["d"]["length"] = -1.0
    assert "element 'd' (Drift), field 'length'" in str(e.value)
    with pytest.raises(KeyError) as e:
        ring["no_such_element"]
    assert "element 'no_such_element'" in str(e.value)
    # a refused value leaves the element as it was
    assert ring["d"]["length"] == json.load(open(path))["elements"]["d"]["length"]


def test_bad_lattice_error_equals_the_cli_message(tmp_path):
    bad = tmp_path / "bad.json"
    doc = json.load(open(lattice_path("fodo_ring.json")))
    name = next(n for n, e in doc["elements"].items() if e["type"] == "Drift")
    doc["elements"][name]["length"] = "long"
    bad.write_text(json.dumps(doc))
    _, err = run_cli("track", bad, "-n", 1, "--device", "cpu", expect_rc=2)
    with pytest.raises(ft.InputError) as e:
        ft.Lattice.from_file(bad)
    assert err.strip() == f"error: {e.value}"
    assert re.search(rf"element (#\d+ )?'{name}' \(Drift\), field 'length'", str(e.value))
    with pytest.raises(ft.InputError) as e:
        ft.Lattice.from_dict(doc, file="mine.json")
    assert str(e.value).startswith("mine.json")


def test_unknown_type_lists_the_registered_ones():
    with pytest.raises(ft.InputError) as e:
        ft.Lattice.from_dict({"fusetrack_lattice": 1, "reference": {"mass0": 1e9, "q0": 1, "p0c": 1e9},
                              "elements": {"k": {"type": "NoSuchType"}}, "sequence": ["k"]})
    assert "NoSuchType" in str(e.value) and "Drift" in str(e.value)


def test_element_types_with_fields_and_units():
    types = ft.element_types()
    out, _ = run_cli("info")
    for name in ("Drift", "Multipole", "Cavity", "LongitudinalImpedance"):
        assert name in types and re.search(rf"^  {name} \[", out, re.M)
    length = next(f for f in types["Drift"]["fields"] if f["name"] == "length")
    assert length["unit"] == "m" and length["required"] and length["default"] is None
    knl = next(f for f in types["Multipole"]["fields"] if f["name"] == "knl")
    assert knl["count"] > 1 and knl["type"] == "double"
    assert types["LongitudinalImpedance"]["kind"] == "collective"
    assert any(p["name"] == "builtin" for p in ft.plugins())


def test_plugin_loading_and_plugin_errors():
    tutorial = os.path.join(BUILD_DIR, "tests", "plugins", "examples", "tutorial", "build",
                            "fusetrack_plugin_tutorial.so")
    abi99 = os.path.join(BUILD_DIR, "tests", "plugins", "fixtures", "fusetrack_plugin_fixture_abi99.so")
    if not (os.path.exists(tutorial) and os.path.exists(abi99)):
        pytest.skip("the example plugins and fixtures of tests/plugins are not built")
    ft.load_plugin(tutorial)
    assert "KickX" in ft.element_types()
    ring = ft.Lattice.from_file(os.path.join(BUILD_DIR, "tests", "plugins", "examples", "tutorial", "lattice.json"))
    assert any(ring[n].type == "KickX" for n in ring.element_names)
    _, err = run_cli("info", "--no-fields", "--plugin", abi99, expect_rc=3)
    with pytest.raises(ft.PluginError) as e:
        ft.load_plugin(abi99)
    assert err.strip().endswith(str(e.value))
    assert "plugin ABI version 99 does not match" in str(e.value)
