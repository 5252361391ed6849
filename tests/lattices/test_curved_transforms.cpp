// Element transformations of a curved element (a Bend with an `angle`), which the framework applies
// with Xsuite's rigid-motion geometry (framework/src/transform.cpp, the curved branch).
//
// Independent geometric check: in a field-free Bend with the exact model (model 1, k0 = 0, no
// multipoles, no edges) a particle flies in a straight line; the element maps the line from its
// entry plane to its exit plane. Moving or rotating the element rigidly moves both planes, but the
// transformation carries the particle from the line's entry plane to the moved entry plane, through
// the moved box and back to the line's exit plane, all along the same straight line: the result must
// be that of the unmoved element, whatever the shift, rotation or anchor. A wrong sign, order or
// exit geometry in the curved formulas shows at first order in the misalignment. rot_s_rad is a
// tilt with the frame (the bending plane turns): alone it is SRotation + element + SRotation back,
// and the misalignments then move the tilted box. With a field the transformation must change the
// result (the check is not comparing identities).
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "fusetrack/tracker.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_curved_transforms.
namespace test_curved_transforms {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

Lattice curved_lattice(const json& bend) {
  json doc = {{"fusetrack_lattice", 1},
              {"reference", {{"mass0", 510998.95}, {"q0", -1.0}, {"p0c", 3e9}}},
              {"elements", {{"b", bend}}},
              {"sequence", {"b"}}};
  return lattice_from_json(doc, "curved_transform_test", ft::test::builtin_registry());
}

Particles probe_particles(double beta0) {
  Particles p(0, beta0);
  p.resize(9);
  for (size_t i = 0; i < 9; ++i) {
    const double a = 1e-3 * (static_cast<double>(i) - 4.0);
    p.set(i, a, 3e-4 * std::cos(a * 1e3), 0.6 * a - 2e-4, -1e-4 + a * 0.05, 0.02 * a, 1e-3 * std::sin(i * 1.0));
  }
  return p;
}

Particles track_once(const Lattice& lattice, Particles p) {
  TrackOptions o;
  o.turns = 1;
  o.threads = 1;
  make_cpu_backend(lattice)->track(p, o);
  return p;
}

}  // namespace

TEST_CASE("curved transformations: a misaligned field-free curved element is the same element") {
  const double length = 2.0, angle = 0.3;
  const json field_free = {{"type", "Bend"}, {"length", length}, {"angle", angle},
                           {"k0_from_h", 0}, {"k0", 0.0},        {"model", 1}};
  const Lattice plain = curved_lattice(field_free);
  const Particles start = probe_particles(plain.reference().beta0());
  const Particles reference = track_once(plain, start);
  // The field-free element does bend the frame: x changes at first order in the angle.
  CHECK(std::fabs(reference.x[0] - start.x[0]) > 1e-4);
  // rot_s_rad tilts the element with its frame (the bending plane turns, MAD-X TILT): the unmoved
  // tilted element is SRotation(psi), the element, SRotation(-psi), built here by hand with the
  // sines and cosines the framework uses. The misalignments then move that tilted box rigidly.
  const double psi = 0.2;
  Lattice tilted_by_hand = [&] {
    json doc = {{"fusetrack_lattice", 1},
                {"reference", {{"mass0", 510998.95}, {"q0", -1.0}, {"p0c", 3e9}}},
                {"elements",
                 {{"b", field_free},
                  {"in", {{"type", "SRotation"}, {"angle", psi * 180 / M_PI}}},
                  {"out", {{"type", "SRotation"}, {"angle", -psi * 180 / M_PI}}}}},
                {"sequence", {"in", "b", "out"}}};
    Lattice l = lattice_from_json(doc, "curved_transform_test", ft::test::builtin_registry());
    l.set_field(static_cast<uint32_t>(l.find_definition("in")), "cos_z", std::cos(psi));
    l.set_field(static_cast<uint32_t>(l.find_definition("in")), "sin_z", std::sin(psi));
    l.set_field(static_cast<uint32_t>(l.find_definition("out")), "cos_z", std::cos(-psi));
    l.set_field(static_cast<uint32_t>(l.find_definition("out")), "sin_z", std::sin(-psi));
    return l;
  }();
  const Particles tilted_reference = track_once(tilted_by_hand, start);
  {
    json tilted = field_free;
    tilted["rot_s_rad"] = psi;
    const Particles out = track_once(curved_lattice(tilted), start);
    // To rounding, not bit for bit: the curved construction multiplies 4x4 frame matrices, and the
    // identity misalignment leaves shifts and rotations of ~1e-17 in the operation list.
    for (size_t i = 0; i < start.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(out.x[i] - tilted_reference.x[i]) < 1e-15);
      CHECK(std::fabs(out.px[i] - tilted_reference.px[i]) < 1e-15);
      CHECK(std::fabs(out.y[i] - tilted_reference.y[i]) < 1e-15);
      CHECK(std::fabs(out.py[i] - tilted_reference.py[i]) < 1e-15);
      CHECK(std::fabs(out.zeta[i] - tilted_reference.zeta[i]) < 1e-15);
    }
    CHECK(std::fabs(out.y[0] - reference.y[0]) > 1e-5);  // and the tilt matters
  }
  struct Case {
    const char* what;
    json fields;
  };
  const json everything = {{"shift_x", 1e-3},
                           {"shift_y", -2e-3},
                           {"shift_s", 0.01},
                           {"rot_x_rad", 1e-3},
                           {"rot_y_rad", -2e-3},
                           {"rot_s_rad_no_frame", 0.05},
                           {"rot_shift_anchor", length / 2}};
  const Case cases[] = {
      {"shift_x", {{"shift_x", 2e-3}}},
      {"shift_y", {{"shift_y", -1.5e-3}}},
      {"shift_s", {{"shift_s", 0.02}}},
      {"rot_x_rad", {{"rot_x_rad", 2e-3}}},
      {"rot_y_rad", {{"rot_y_rad", -3e-3}}},
      {"rot_s_rad_no_frame (a roll of the box)", {{"rot_s_rad_no_frame", 0.3}}},
      {"everything, anchored in the middle", everything},
  };
  for (const bool with_tilt : {false, true}) {
    for (const Case& c : cases) {
      const std::string what = c.what;
      CAPTURE(what);
      CAPTURE(with_tilt);
      json moved = field_free;
      for (const auto& [k, v] : c.fields.items()) moved[k] = v;
      if (with_tilt) moved["rot_s_rad"] = psi;
      const Lattice transformed = curved_lattice(moved);
      REQUIRE(transformed.transform(0) != nullptr);
      const Particles out = track_once(transformed, start);
      const Particles& expected = with_tilt ? tilted_reference : reference;
      for (size_t i = 0; i < start.size(); ++i) {
        CAPTURE(i);
        REQUIRE(out.state[i] > 0);
        CHECK(std::fabs(out.x[i] - expected.x[i]) < 1e-14);
        CHECK(std::fabs(out.px[i] - expected.px[i]) < 1e-15);
        CHECK(std::fabs(out.y[i] - expected.y[i]) < 1e-14);
        CHECK(std::fabs(out.py[i] - expected.py[i]) < 1e-15);
        CHECK(std::fabs(out.zeta[i] - expected.zeta[i]) < 1e-13);
      }
    }
  }
}

TEST_CASE("curved transformations: with a field the misalignment changes the motion") {
  const json bend = {{"type", "Bend"}, {"length", 2.0}, {"angle", 0.3}, {"k1", 0.4}, {"model", 1}};
  json moved = bend;
  moved["shift_x"] = 2e-3;
  const Lattice plain = curved_lattice(bend);
  const Particles start = probe_particles(plain.reference().beta0());
  const Particles a = track_once(plain, start);
  const Particles b = track_once(curved_lattice(moved), start);
  // A quadrupole component displaced by 2 mm kicks by about k1 L dx = 1.6e-3.
  CHECK(std::fabs((b.px[4] - a.px[4]) - 0.4 * 2.0 * 2e-3) < 0.5 * 0.4 * 2.0 * 2e-3);
}

}  // namespace test_curved_transforms
