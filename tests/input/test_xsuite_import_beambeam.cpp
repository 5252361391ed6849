// Xsuite import of xfields' weak-strong beam-beam lenses BeamBeamBiGaussian2D and BeamBeamBiGaussian3D into
// fusetrack's elements of the same names: the fields one by one, the crossing angle from xfields' sines and
// cosines, the HL-LHC collision lattice with its 224 lenses loaded and tracked, its closed orbit kept by the
// post-subtracted dipolar kicks, and bad input (sizes, NaN, slice arrays, beamstrahlung) naming element and field.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/lattice.h"
#include "fusetrack/optics.h"
#include "fusetrack/tracker.h"
#include "fusetrack/xsuite_import.h"
#include "support/paths.h"
#include "support/registry.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import_beambeam.
namespace test_xsuite_import_beambeam {

using ft::test::builtin_registry;
using ft::test::error_message;
using json = nlohmann::ordered_json;

namespace {

/// A drift and one lens of each kind as xfields' to_dict writes them (fields at their default 0 left out).
json bb_line() {
  return json::parse(R"({
    "__class__": "Line",
    "elements": {
      "d": {"__class__": "Drift", "length": 2.0},
      "lr": {"__class__": "BeamBeamBiGaussian2D", "scale_strength": 1.0, "ref_shift_x": 1e-6,
             "other_beam_shift_x": 0.0095, "other_beam_shift_y": -2e-4, "post_subtract_px": -1.7e-9,
             "post_subtract_py": 5e-10, "other_beam_q0": 1.602176634e-19, "other_beam_beta0": 1.0,
             "other_beam_num_particles": 1.373e30, "other_beam_Sigma_11": 4.8e-6, "other_beam_Sigma_13": 1e-8,
             "other_beam_Sigma_33": 2.2e-6, "min_sigma_diff": 1e-10},
      "ho": {"__class__": "BeamBeamBiGaussian3D", "scale_strength": 1.0,
             "_sin_phi": 0.00025, "_cos_phi": 0.9999999687499999, "_tan_phi": 0.0002500000078125,
             "_sin_alpha": 0.6, "_cos_alpha": 0.8,
             "ref_shift_x": 4e-8, "ref_shift_px": -5e-9, "ref_shift_y": -1.7e-5, "ref_shift_py": 2.5e-4,
             "ref_shift_zeta": -5e-6, "ref_shift_pzeta": 3.9e-6, "other_beam_shift_y": 1.3e-5,
             "post_subtract_px": -9.6e-10, "post_subtract_py": -4.7e-7, "post_subtract_pzeta": -1.2e-10,
             "other_beam_q0": 1.0, "num_slices_other_beam": 2,
             "slices_other_beam_num_particles": [1e11, 1.2e11],
             "slices_other_beam_x_center_star": [0.0, 1e-7], "slices_other_beam_px_center_star": [0.0, 0.0],
             "slices_other_beam_y_center_star": [0.0, 0.0], "slices_other_beam_py_center_star": [0.0, 0.0],
             "slices_other_beam_zeta_center_star": [-0.03, 0.03], "slices_other_beam_pzeta_center_star": [0.0, 0.0],
             "slices_other_beam_Sigma_11_star": [6.07e-11, 6.07e-11], "slices_other_beam_Sigma_12_star": [-1.5e-10, -1.5e-10],
             "slices_other_beam_Sigma_13_star": [0.0, 0.0], "slices_other_beam_Sigma_14_star": [0.0, 0.0],
             "slices_other_beam_Sigma_22_star": [2.2e-9, 2.2e-9], "slices_other_beam_Sigma_23_star": [0.0, 0.0],
             "slices_other_beam_Sigma_24_star": [0.0, 0.0], "slices_other_beam_Sigma_33_star": [6.0e-11, 6.0e-11],
             "slices_other_beam_Sigma_34_star": [-1.5e-10, -1.5e-10], "slices_other_beam_Sigma_44_star": [2.2e-9, 2.2e-9],
             "min_sigma_diff": 1e-10, "threshold_singular": 1e-28, "_flag_beamstrahlung": 0,
             "slices_other_beam_zeta_bin_width_star_beamstrahlung": [0.0, 0.0],
             "other_beam_sigma_55_star_beamstrahlung": 0.0}
    },
    "element_names": ["d", "lr", "d", "ho", "d"],
    "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [6.8e12]}
  })");
}

/// The message of the error that importing and loading `line` raises.
std::string load_error(const json& line) {
  return error_message([&] {
    const json doc = ft::xsuite_to_fusetrack(line, "bb_line.json", {});
    (void)ft::lattice_from_json(doc, "bb_line.json", builtin_registry());
  });
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("Xsuite import: BeamBeamBiGaussian2D and 3D map field by field and load") {
  const json line = bb_line();
  const json doc = ft::xsuite_to_fusetrack(line, "bb_line.json", {});
  const json& lr = doc.at("elements").at("lr");
  const json& xlr = line.at("elements").at("lr");
  CHECK(lr.at("type") == "BeamBeamBiGaussian2D");
  for (const char* f : {"scale_strength", "ref_shift_x", "other_beam_shift_x", "other_beam_shift_y", "post_subtract_px",
                        "post_subtract_py", "other_beam_q0", "other_beam_beta0", "other_beam_num_particles",
                        "other_beam_Sigma_11", "other_beam_Sigma_13", "other_beam_Sigma_33", "min_sigma_diff"}) {
    CAPTURE(f);
    CHECK(lr.at(f).get<double>() == xlr.at(f).get<double>());
  }
  CHECK(lr.at("ref_shift_y").get<double>() == 0.0);  // absent: xobjects' default 0
  {  // scale_strength = 0 (a lens switched off) is left out by to_dict: absent means 0, not 1
    json off = line;
    off["elements"]["lr"].erase("scale_strength");
    off["elements"]["ho"].erase("scale_strength");
    const json doc_off = ft::xsuite_to_fusetrack(off, "bb_line.json", {});
    CHECK(doc_off.at("elements").at("lr").at("scale_strength").get<double>() == 0.0);
    CHECK(doc_off.at("elements").at("ho").at("scale_strength").get<double>() == 0.0);
  }

  const json& ho = doc.at("elements").at("ho");
  const json& xho = line.at("elements").at("ho");
  CHECK(ho.at("type") == "BeamBeamBiGaussian3D");
  CHECK(ho.at("phi").get<double>() == doctest::Approx(std::asin(0.00025)).epsilon(1e-15));
  CHECK(ho.at("alpha").get<double>() == doctest::Approx(std::atan2(0.6, 0.8)).epsilon(1e-15));
  CHECK(ho.at("num_slices_other_beam") == 2);
  for (const char* f :
       {"slices_other_beam_num_particles", "slices_other_beam_x_center_star", "slices_other_beam_zeta_center_star",
        "slices_other_beam_Sigma_12_star", "slices_other_beam_Sigma_44_star"})
    CHECK(ho.at(f) == xho.at(f));
  for (const char* f : {"ref_shift_pzeta", "ref_shift_py", "other_beam_shift_y", "post_subtract_pzeta"})
    CHECK(ho.at(f).get<double>() == xho.at(f).get<double>());

  const ft::Lattice lattice = ft::lattice_from_json(doc, "bb_line.json", builtin_registry());
  CHECK(lattice.circumference() == 6.0);  // the lenses are thin
  const uint32_t d = static_cast<uint32_t>(lattice.find_definition("ho"));
  CHECK(lattice.field(d, "slices_other_beam_num_particles", 1) == 1.2e11);
  CHECK(lattice.field(d, "slices_other_beam_num_particles", 2) == 0.0);
}

TEST_CASE("Xsuite import: bad beam-beam input names the element and the field") {
  {  // a partner of zero size
    json line = bb_line();
    line["elements"]["lr"]["other_beam_Sigma_33"] = 0.0;
    const std::string msg = load_error(line);
    CHECK(contains(msg, "lr"));
    CHECK(contains(msg, "other_beam_Sigma_33 = 0"));
  }
  {  // a negative slice size
    json line = bb_line();
    line["elements"]["ho"]["slices_other_beam_Sigma_11_star"][1] = -6e-11;
    const std::string msg = load_error(line);
    CHECK(contains(msg, "ho"));
    CHECK(contains(msg, "slices_other_beam_Sigma_11_star[1]"));
  }
  {  // NaN
    json line = bb_line();
    line["elements"]["lr"]["other_beam_shift_y"] = std::nan("");
    const std::string msg = load_error(line);
    CHECK(contains(msg, "lr"));
    CHECK(contains(msg, "other_beam_shift_y"));
  }
  {  // a slice array shorter than num_slices_other_beam
    json line = bb_line();
    line["elements"]["ho"]["slices_other_beam_py_center_star"] = json::array({0.0});
    const std::string msg = load_error(line);
    CHECK(contains(msg, "'ho' (BeamBeamBiGaussian3D)"));
    CHECK(contains(msg, "slices_other_beam_py_center_star"));
    CHECK(contains(msg, "1 entries, but num_slices_other_beam = 2"));
  }
  {  // a missing slice array
    json line = bb_line();
    line["elements"]["ho"].erase("slices_other_beam_Sigma_33_star");
    CHECK(contains(load_error(line), "slices_other_beam_Sigma_33_star"));
  }
  {  // beamstrahlung switched on
    json line = bb_line();
    line["elements"]["ho"]["_flag_beamstrahlung"] = 2;
    const std::string msg = load_error(line);
    CHECK(contains(msg, "BeamBeamBiGaussian3D._flag_beamstrahlung = 2"));
    CHECK(contains(msg, "beamstrahlung is not modelled"));
  }
  {  // sine and cosine that are no angle
    json line = bb_line();
    line["elements"]["ho"]["_cos_alpha"] = 0.5;
    CHECK(contains(load_error(line), "_sin_alpha"));
  }
}

TEST_CASE("HL-LHC at collision with its 224 beam-beam lenses: loads, tracks, keeps the closed orbit") {
  const std::string path = ft::test::require_shared("lattices/xsuite/hllhc14_with_beambeam.json");
  const ft::Lattice lattice = ft::load_lattice(path, builtin_registry());
  size_t lenses_2d = 0, lenses_3d = 0;
  for (size_t i = 0; i < lattice.sequence().size(); ++i) {
    const std::string& type = lattice.element(i).type->name;
    lenses_2d += type == "BeamBeamBiGaussian2D";
    lenses_3d += type == "BeamBeamBiGaussian3D";
  }
  CHECK(lenses_2d == 180);
  CHECK(lenses_3d == 44);

  // The same ring with the lenses replaced by markers.
  json doc;
  {
    std::ifstream in(path);
    in >> doc;
  }
  for (auto& [name, element] : doc.at("line").at("elements").items())
    if (contains(element.at("__class__").get<std::string>(), "BeamBeam")) element = json{{"__class__", "Marker"}};
  const ft::Lattice bare = ft::lattice_from_json(ft::xsuite_to_fusetrack(doc, path, {}), path, builtin_registry());

  // 10 particles, 3 turns on the CPU: none lost, and the lenses act.
  ft::Particles with(10, lattice.reference().beta0()), without(10, lattice.reference().beta0());
  for (size_t i = 0; i < 10; ++i) {
    const double a = 1e-5 * static_cast<double>(i + 1);
    with.set(i, a, 0.0, -0.7 * a, 0.0, 0.0, 1e-5);
    without.set(i, a, 0.0, -0.7 * a, 0.0, 0.0, 1e-5);
  }
  ft::TrackOptions options;
  options.turns = 3;
  ft::make_cpu_backend(lattice)->track(with, options);
  ft::make_cpu_backend(bare)->track(without, options);
  CHECK(with.alive_count() == 10);
  double largest_change = 0.0;
  for (size_t i = 0; i < 10; ++i) {
    CHECK(std::isfinite(with.x[i]));
    CHECK(std::isfinite(with.delta[i]));
    largest_change = std::fmax(largest_change, std::fabs(with.px[i] - without.px[i]));
  }
  CHECK(largest_change > 1e-8);

  // xfields sets post_subtract_* to the dipolar kick of each lens on the closed orbit of the ring without
  // beam-beam: with the lenses on, the closed orbit stays where it was, while the tunes drop by the
  // beam-beam tune shift of like-charged beams.
  const ft::LinearOptics o_bare = ft::compute_linear_optics(bare);
  const ft::LinearOptics o_bb = ft::compute_linear_optics(lattice);
  double orbit_change = 0.0;
  for (int k = 0; k < 4; ++k)
    orbit_change = std::fmax(orbit_change, std::fabs(o_bb.closed_orbit[k] - o_bare.closed_orbit[k]));
  MESSAGE(fmt::format("HL-LHC closed orbit moved by {:.2e} with the lenses; tunes {:.6f} {:.6f} -> {:.6f} {:.6f}",
                      orbit_change, o_bare.qx, o_bare.qy, o_bb.qx, o_bb.qy));
  CHECK(orbit_change < 1e-9);
  CHECK(o_bare.qx - o_bb.qx > 0.005);
  CHECK(o_bare.qy - o_bb.qy > 0.005);
  CHECK(o_bare.qx - o_bb.qx < 0.03);
  CHECK(o_bare.qy - o_bb.qy < 0.03);
}

}  // namespace test_xsuite_import_beambeam
