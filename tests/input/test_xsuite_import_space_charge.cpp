// Xsuite import of xfields' SpaceChargeBiGaussian (frozen space charge) into fusetrack's element of the
// same name: the nested field map and longitudinal profile of xfields' to_dict, the ducktrack copies it adds,
// and what is not modelled (q-Gaussian profiles, a cut support, the longitudinal kick) reported by field.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fusetrack/xsuite_import.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_xsuite_import_space_charge.
namespace test_xsuite_import_space_charge {

using json = nlohmann::ordered_json;

namespace {

/// A drift and one space-charge element as xfields' SpaceChargeBiGaussian.to_dict writes it.
json sc_line() {
  return json::parse(R"({
    "__class__": "Line",
    "elements": {
      "d": {"__class__": "Drift", "length": 2.0},
      "sc": {"__class__": "SpaceChargeBiGaussian",
             "longitudinal_profile": {"__class__": "LongitudinalProfileQGaussian", "number_of_particles": 2e10,
                                      "_q_tol": 1e-6, "_z0": 0.25, "_sigma_z": 1.5, "_q_param": 1.0,
                                      "_cq_param": 1.7724538509055159, "_beta_param": 0.2222222222222222,
                                      "_sqrt_beta_param": 0.4714045207910317, "_support_min": -1e10, "_support_max": 1e10},
             "fieldmap": {"__class__": "BiGaussianFieldMap", "mean_x": 1e-4, "mean_y": -2e-4, "sigma_x": 3e-3,
                          "sigma_y": 2e-3, "min_sigma_diff": 1e-10, "_updatable": 1},
             "length": 2.0, "_z_kick_num_integ_per_sigma": 0,
             "number_of_particles": 2e10, "bunchlength_rms": 1.5, "sigma_x": 3e-3, "sigma_y": 2e-3,
             "x_co": 1e-4, "y_co": -2e-4}
    },
    "element_names": ["d", "sc", "d"],
    "particle_ref": {"mass0": 938272088.16, "q0": 1.0, "p0c": [5.708301552147694e8]}
  })");
}

std::string import_error(const json& line) {
  return ft::test::error_message([&] { ft::xsuite_to_fusetrack(line, "sc_line.json", {}); });
}

}  // namespace

TEST_CASE("Xsuite import: SpaceChargeBiGaussian maps field by field") {
  const json doc = ft::xsuite_to_fusetrack(sc_line(), "sc_line.json", {});
  const json& e = doc.at("elements").at("sc");
  CHECK(e.at("type") == "SpaceChargeBiGaussian");
  CHECK(e.at("length").get<double>() == 2.0);
  CHECK(e.at("number_of_particles").get<double>() == 2e10);
  CHECK(e.at("sigma_z").get<double>() == 1.5);
  CHECK(e.at("z0").get<double>() == 0.25);
  CHECK(e.at("sigma_x").get<double>() == 3e-3);
  CHECK(e.at("sigma_y").get<double>() == 2e-3);
  CHECK(e.at("mean_x").get<double>() == 1e-4);
  CHECK(e.at("mean_y").get<double>() == -2e-4);
  CHECK(e.at("min_sigma_diff").get<double>() == 1e-10);
  // It loads, and the element is thin: the ring is 4 m.
  const ft::Lattice lattice = ft::lattice_from_json(doc, "sc_line.json", ft::test::builtin_registry());
  CHECK(lattice.circumference() == 4.0);
  // Without the ducktrack copies (older xfields) the same.
  json older = sc_line();
  for (const char* k : {"number_of_particles", "bunchlength_rms", "sigma_x", "sigma_y", "x_co", "y_co"})
    older["elements"]["sc"].erase(k);
  CHECK(ft::xsuite_to_fusetrack(older, "sc_line.json", {}).at("elements").at("sc") == e);
}

TEST_CASE("Xsuite import: SpaceChargeBiGaussian that fusetrack does not model is named by field") {
  {
    json line = sc_line();
    line["elements"]["sc"]["longitudinal_profile"]["_q_param"] = 1.2;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("longitudinal_profile._q_param") != std::string::npos);
    CHECK(msg.find("q-Gaussian") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"]["longitudinal_profile"]["_support_max"] = 3.0;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("longitudinal_profile._support_max") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"]["_z_kick_num_integ_per_sigma"] = 5;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("z_kick_num_integ_per_sigma") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"]["fieldmap"]["unknown_knob"] = 2.0;
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("fieldmap.unknown_knob") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"]["sigma_x"] = 4e-3;  // the ducktrack copy disagrees with the field map
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("'sc'") != std::string::npos);
    CHECK(msg.find("sigma_x") != std::string::npos);
    CHECK(msg.find("disagrees") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"].erase("fieldmap");
    const std::string msg = import_error(line);
    CAPTURE(msg);
    CHECK(msg.find("fieldmap") != std::string::npos);
    CHECK(msg.find("missing") != std::string::npos);
  }
  {
    json line = sc_line();
    line["elements"]["sc"]["fieldmap"]["sigma_y"] = 0.0;  // imports; the element refuses it when it loads
    line["elements"]["sc"].erase("sigma_y");
    const json doc = ft::xsuite_to_fusetrack(line, "sc_line.json", {});
    const std::string msg =
        ft::test::error_message([&] { ft::lattice_from_json(doc, "sc_line.json", ft::test::builtin_registry()); });
    CAPTURE(msg);
    CHECK(msg.find("'sc'") != std::string::npos);
    CHECK(msg.find("field 'sigma_y'") != std::string::npos);
  }
}

}  // namespace test_xsuite_import_space_charge
