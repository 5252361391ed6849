// Xsuite import of xfields' weak-strong beam-beam lenses BeamBeamBiGaussian2D and BeamBeamBiGaussian3D:
// every field carried over, the crossing angle from its stored sine and cosine, the effects fusetrack does
// not model (beamstrahlung, Bhabha scattering, luminosity) refused by field, and bad input (sizes, slice
// counts against the arrays, inconsistent angles) named by element and field.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/xsuite_import.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import_beambeam.
namespace test_xsuite_import_beambeam {

using json = nlohmann::ordered_json;

namespace {

/// A drift, one 2D and one 3D lens (two slices) as xfields' to_dict writes them.
json bb_line() {
  return json::parse(R"({
    "__class__": "Line",
    "elements": {
      "d": {"__class__": "Drift", "length": 2.0},
      "lr": {"__class__": "BeamBeamBiGaussian2D", "scale_strength": 1.0, "ref_shift_x": 1e-5, "ref_shift_y": -2e-5,
             "other_beam_shift_x": 0.01, "other_beam_shift_y": 0.002, "post_subtract_px": -1.5e-9,
             "post_subtract_py": 4e-10, "other_beam_q0": 1.0, "other_beam_beta0": 1.0,
             "other_beam_num_particles": 2.2e11, "other_beam_Sigma_11": 4.8e-6, "other_beam_Sigma_13": 0.0,
             "other_beam_Sigma_33": 2.2e-6, "min_sigma_diff": 1e-10},
      "ho": {"__class__": "BeamBeamBiGaussian3D", "scale_strength": 1.0,
             "_sin_phi": 0.00024999999739583335, "_cos_phi": 0.99999996875, "_tan_phi": 0.00025000000520833335,
             "_sin_alpha": 1.0, "_cos_alpha": 0.0,
             "ref_shift_x": 1e-8, "ref_shift_px": -5e-9, "ref_shift_y": -1.7e-5, "ref_shift_py": 2.5e-4,
             "ref_shift_zeta": -5e-6, "ref_shift_pzeta": 4e-6,
             "other_beam_shift_x": 2e-8, "other_beam_shift_px": 0.0, "other_beam_shift_y": 1.3e-5,
             "other_beam_shift_py": 0.0, "other_beam_shift_zeta": 0.0, "other_beam_shift_pzeta": 0.0,
             "post_subtract_x": -3e-18, "post_subtract_px": -9.6e-10, "post_subtract_y": -1.6e-15,
             "post_subtract_py": -4.7e-7, "post_subtract_zeta": 0.0, "post_subtract_pzeta": -1.2e-10,
             "other_beam_q0": 1.0, "num_slices_other_beam": 2,
             "slices_other_beam_num_particles": [1e11, 1.2e11],
             "slices_other_beam_x_center_star": [0.0, 1e-7], "slices_other_beam_px_center_star": [0.0, 0.0],
             "slices_other_beam_y_center_star": [0.0, 0.0], "slices_other_beam_py_center_star": [0.0, 0.0],
             "slices_other_beam_zeta_center_star": [0.03, -0.03], "slices_other_beam_pzeta_center_star": [0.0, 0.0],
             "slices_other_beam_Sigma_11_star": [6e-11, 6.1e-11], "slices_other_beam_Sigma_12_star": [-1.5e-10, -1.5e-10],
             "slices_other_beam_Sigma_13_star": [0.0, 0.0], "slices_other_beam_Sigma_14_star": [0.0, 0.0],
             "slices_other_beam_Sigma_22_star": [2.2e-9, 2.2e-9], "slices_other_beam_Sigma_23_star": [0.0, 0.0],
             "slices_other_beam_Sigma_24_star": [0.0, 0.0], "slices_other_beam_Sigma_33_star": [6e-11, 6e-11],
             "slices_other_beam_Sigma_34_star": [-1.5e-10, -1.5e-10], "slices_other_beam_Sigma_44_star": [2.2e-9, 2.2e-9],
             "min_sigma_diff": 1e-10, "threshold_singular": 1e-28, "_flag_beamstrahlung": 0,
             "slices_other_beam_zeta_bin_width_star_beamstrahlung": [0.0, 0.0],
             "other_beam_sigma_55_star_beamstrahlung": 0.0}
    },
    "element_names": ["d", "lr", "d", "ho", "d"],
    "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [7e12]}
  })");
}

std::string import_error(const json& line) {
  return ft::test::error_message([&] {
    const json doc = ft::xsuite_to_fusetrack(line, "bb_line.json", {});
    ft::lattice_from_json(doc, "bb_line.json", ft::test::builtin_registry());
  });
}

}  // namespace

TEST_CASE("Xsuite import: beam-beam lenses map field by field and load") {
  const json xs = bb_line();
  const json doc = ft::xsuite_to_fusetrack(xs, "bb_line.json", {});
  const json& lr = doc.at("elements").at("lr");
  CHECK(lr.at("type") == "BeamBeamBiGaussian2D");
  for (const char* f :
       {"scale_strength", "ref_shift_x", "ref_shift_y", "other_beam_shift_x", "other_beam_shift_y", "post_subtract_px",
        "post_subtract_py", "other_beam_q0", "other_beam_beta0", "other_beam_num_particles", "other_beam_Sigma_11",
        "other_beam_Sigma_13", "other_beam_Sigma_33"}) {
    CAPTURE(f);
    CHECK(lr.at(f).get<double>() == xs["elements"]["lr"][f].get<double>());
  }
  const json& ho = doc.at("elements").at("ho");
  CHECK(ho.at("type") == "BeamBeamBiGaussian3D");
  CHECK(ho.at("num_slices_other_beam") == 2);
  CHECK(std::fabs(ho.at("phi").get<double>() - std::asin(0.00024999999739583335)) < 1e-18);
  CHECK(std::fabs(ho.at("alpha").get<double>() - 1.5707963267948966) < 1e-15);
  for (const auto& [k, v] : xs["elements"]["ho"].items()) {
    if (k.rfind("ref_shift_", 0) == 0 || k.rfind("other_beam_shift_", 0) == 0 || k.rfind("post_subtract_", 0) == 0 ||
        (k.rfind("slices_other_beam_", 0) == 0 && k.find("beamstrahlung") == std::string::npos)) {
      CAPTURE(k);
      CHECK(ho.at(k) == v);
    }
  }
  const ft::Lattice lattice = ft::lattice_from_json(doc, "bb_line.json", ft::test::builtin_registry());
  CHECK(lattice.circumference() == 6.0);
}

TEST_CASE("Xsuite import: beam-beam options fusetrack does not model are refused by field") {
  for (const char* flag : {"_flag_beamstrahlung", "flag_bhabha", "flag_luminosity"}) {
    json line = bb_line();
    line["elements"]["ho"][flag] = 1;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find(std::string("BeamBeamBiGaussian3D.") + flag) != std::string::npos);
    CHECK(msg.find("not modelled") != std::string::npos);
  }
  {  // an unknown field that is not zero
    json line = bb_line();
    line["elements"]["lr"]["other_beam_shift_zeta"] = 0.1;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("other_beam_shift_zeta") != std::string::npos);
  }
}

TEST_CASE("Xsuite import: a lens of more than 8 slices becomes consecutive lenses of at most 8") {
  json line = bb_line();
  json& ho = line["elements"]["ho"];
  const size_t n = 10;
  for (auto& [k, v] : ho.items()) {
    if (!v.is_array()) continue;
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = v[i % 2].get<double>() * (1.0 + 0.01 * static_cast<double>(i));
    if (k == "slices_other_beam_zeta_center_star")
      for (size_t i = 0; i < n; ++i) values[i] = 0.04 - 0.008 * static_cast<double>(i);
    v = values;
  }
  ho["num_slices_other_beam"] = n;
  std::vector<std::string> warnings;
  ft::XsuiteImportOptions options;
  options.warnings = &warnings;
  const json doc = ft::xsuite_to_fusetrack(line, "bb_line.json", options);
  CHECK(doc.at("sequence") == json::array({"d", "lr", "d", "ho", "ho/part2", "d"}));
  const json& first = doc.at("elements").at("ho");
  const json& second = doc.at("elements").at("ho/part2");
  CHECK(first.at("num_slices_other_beam") == 8);
  CHECK(second.at("num_slices_other_beam") == 2);
  for (const auto& [k, v] : ho.items()) {
    if (!v.is_array() || k.find("beamstrahlung") != std::string::npos) continue;
    CAPTURE(k);
    for (size_t i = 0; i < n; ++i) CHECK((i < 8 ? first.at(k)[i] : second.at(k)[i - 8]) == v[i]);
  }
  for (const char* c : {"x", "px", "y", "py", "zeta", "pzeta"}) {
    const std::string f = std::string("post_subtract_") + c;
    CAPTURE(f);
    CHECK(first.at(f).get<double>() == 0.0);
    CHECK(second.at(f) == ho.at(f));
    for (const char* shift : {"ref_shift_", "other_beam_shift_"}) {
      CHECK(first.at(std::string(shift) + c) == ho.at(std::string(shift) + c));
      CHECK(second.at(std::string(shift) + c) == ho.at(std::string(shift) + c));
    }
  }
  CHECK(first.at("phi") == second.at("phi"));
  CHECK(first.at("alpha") == second.at("alpha"));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("consecutive lenses") != std::string::npos);
  CHECK_NOTHROW(ft::lattice_from_json(doc, "bb_line.json", ft::test::builtin_registry()));
}

TEST_CASE("Xsuite import: bad beam-beam input names the element and the field") {
  struct Bad {
    const char* element;
    const char* field;
    json value;
    const char* named;
    const char* says;
  };
  const Bad cases[] = {
      {"lr", "other_beam_Sigma_11", 0.0, "other_beam_Sigma_11", "must be > 0"},
      {"lr", "other_beam_Sigma_33", -1e-6, "other_beam_Sigma_33", "must be > 0"},
      {"lr", "other_beam_num_particles", -1.0, "other_beam_num_particles", ">= 0"},
      {"lr", "other_beam_Sigma_13", 1e-5, "other_beam_Sigma_13", "positive definite"},
      {"lr", "min_sigma_diff", -1.0, "min_sigma_diff", ">= 0"},
      {"ho", "num_slices_other_beam", 3, "num_slices_other_beam", "3 slices declared"},
      {"ho", "slices_other_beam_Sigma_12_star", json::array({0.0}), "slices_other_beam_Sigma_12_star",
       "1 entries for 2 partner slices"},
      {"ho", "slices_other_beam_Sigma_33_star", json::array({6e-11, 0.0}), "slices_other_beam_Sigma_33_star[1]",
       "must be > 0"},
      {"ho", "slices_other_beam_num_particles", json::array({1e11, -2.0}), "slices_other_beam_num_particles[1]",
       ">= 0"},
      {"ho", "slices_other_beam_x_center_star", "abc", "slices_other_beam_x_center_star", ""},
      {"ho", "_tan_phi", 0.1, "_tan_phi", "disagrees"},
      {"ho", "_cos_alpha", 0.5, "_sin_alpha", "not the sine and cosine"},
      {"ho", "threshold_singular", -1.0, "threshold_singular", ">= 0"},
  };
  for (const Bad& b : cases) {
    json line = bb_line();
    line["elements"][b.element][b.field] = b.value;
    const std::string msg = import_error(line);
    CAPTURE(b.field);
    CAPTURE(msg);
    CHECK(msg.find(b.element[0] == 'l' ? "'lr'" : "'ho'") != std::string::npos);
    CHECK(msg.find(b.named) != std::string::npos);
    CHECK(msg.find(b.says) != std::string::npos);
  }
  {  // a required slice array missing
    json line = bb_line();
    line["elements"]["ho"].erase("slices_other_beam_Sigma_11_star");
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("slices_other_beam_Sigma_11_star") != std::string::npos);
    CHECK(msg.find("missing") != std::string::npos);
  }
}

}  // namespace test_xsuite_import_beambeam
