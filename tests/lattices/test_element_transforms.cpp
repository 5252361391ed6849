// Element transformations (shift_x, shift_y, shift_s, rot_x_rad, rot_y_rad, rot_s_rad,
// rot_s_rad_no_frame, rot_shift_anchor), applied by the framework around any element:
//  - a shifted and tilted element equals XYShift + SRotation + element + SRotation + XYShift built
//    by hand, bit for bit: the framework runs the same arithmetic (x += -dx; the rotation
//    c x + s y, ...) with the same sines and cosines, in the same order;
//  - a misaligned exact drift is still the same exact drift (a straight flight does not care how
//    the box around it is placed): an independent check of the rotations about x and y, of
//    shift_s and of the anchor, to rounding;
//  - tilted and shifted apertures lose exactly the particles outside the moved shape;
//  - the lattice format: generic fields on any element, bad values named, written back.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "fusetrack/device/transform.h"
#include "fusetrack/tracker.h"
#include "fusetrack/transform.h"
#include "support/lattice_builders.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_element_transforms.
namespace test_element_transforms {

using namespace ft;
using json = nlohmann::ordered_json;

namespace {

const json kReference = {{"mass0", 938272088.16}, {"q0", 1.0}, {"p0c", 2e9}};

Lattice lattice_of(const json& elements, const json& sequence, double limit = 1.0) {
  json doc = {{"fusetrack_lattice", 1},
              {"reference", kReference},
              {"global_aperture", {{"x", limit}, {"y", limit}}},
              {"elements", elements},
              {"sequence", sequence}};
  return lattice_from_json(doc, "transform_test", ft::test::builtin_registry());
}

Particles some_particles(double beta0) {
  Particles p(0, beta0);
  p.resize(9);
  for (size_t i = 0; i < 9; ++i) {
    const double a = 1e-3 * (static_cast<double>(i) - 4.0);
    p.set(i, a, 2e-4 * std::cos(a * 1e3), -0.7 * a + 1e-4, -1e-4 + a * 0.03, 0.01 * a, 1e-3 * std::sin(i * 1.0));
  }
  return p;
}

Particles track_cpu(const Lattice& lattice, Particles p, int64_t turns = 1) {
  TrackOptions o;
  o.turns = turns;
  o.threads = 1;
  make_cpu_backend(lattice)->track(p, o);
  return p;
}

void check_bitwise(const Particles& a, const Particles& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a.x[i] == b.x[i]);
    CHECK(a.px[i] == b.px[i]);
    CHECK(a.y[i] == b.y[i]);
    CHECK(a.py[i] == b.py[i]);
    CHECK(a.zeta[i] == b.zeta[i]);
    CHECK(a.delta[i] == b.delta[i]);
    CHECK(a.state[i] == b.state[i]);
  }
}

}  // namespace

TEST_CASE("transformations: a shifted, tilted quadrupole equals shift + rotation + quadrupole + back, bit for bit") {
  const double dx = 1.3e-3, dy = -0.7e-3, psi = 0.31;
  const json quad = {{"type", "Quadrupole"}, {"length", 0.8}, {"k1", 0.9}, {"k1s", 0.05}, {"num_slices", 3}};
  json moved = quad;
  moved["shift_x"] = dx;
  moved["shift_y"] = dy;
  moved["rot_s_rad"] = psi;
  const Lattice transformed = lattice_of({{"q", moved}, {"d", {{"type", "Drift"}, {"length", 1.0}}}}, {"d", "q", "d"});

  // By hand: XYShift(dx, dy), SRotation(psi), Quadrupole, SRotation(-psi), XYShift(-dx, -dy). The
  // SRotation elements take degrees; their sines and cosines are set to those of the radians the
  // framework uses (sin(-psi) = -sin(psi) exactly), so the arithmetic is the same.
  Lattice by_hand = lattice_of({{"q", quad},
                                {"d", {{"type", "Drift"}, {"length", 1.0}}},
                                {"in_shift", {{"type", "XYShift"}, {"dx", dx}, {"dy", dy}}},
                                {"in_rot", {{"type", "SRotation"}, {"angle", psi * 180.0 / M_PI}}},
                                {"out_rot", {{"type", "SRotation"}, {"angle", -psi * 180.0 / M_PI}}},
                                {"out_shift", {{"type", "XYShift"}, {"dx", -dx}, {"dy", -dy}}}},
                               {"d", "in_shift", "in_rot", "q", "out_rot", "out_shift", "d"});
  const uint32_t in_rot = static_cast<uint32_t>(by_hand.find_definition("in_rot"));
  const uint32_t out_rot = static_cast<uint32_t>(by_hand.find_definition("out_rot"));
  by_hand.set_field(in_rot, "cos_z", std::cos(psi));
  by_hand.set_field(in_rot, "sin_z", std::sin(psi));
  by_hand.set_field(out_rot, "cos_z", std::cos(-psi));
  by_hand.set_field(out_rot, "sin_z", std::sin(-psi));

  const Particles start = some_particles(transformed.reference().beta0());
  check_bitwise(track_cpu(transformed, start, 3), track_cpu(by_hand, start, 3));
  // And the shift changes the result (the test is not comparing two identities).
  const Lattice aligned = lattice_of({{"q", quad}, {"d", {{"type", "Drift"}, {"length", 1.0}}}}, {"d", "q", "d"});
  CHECK(track_cpu(aligned, start, 3).px[0] != track_cpu(transformed, start, 3).px[0]);
}

TEST_CASE("transformations: shift_s of a thin element is an exact drift in and out, bit for bit") {
  const double ds = 0.12;
  const json mult = {{"type", "Multipole"}, {"knl", {0.0, 0.2, 3.0}}, {"ksl", {0.0, 0.0, 0.5}}};
  json moved = mult;
  moved["shift_s"] = ds;
  const Lattice transformed = lattice_of({{"m", moved}}, {"m"});
  const Lattice plain = lattice_of({{"m", mult}}, {"m"});
  // By hand with the element functions: exact drift ds, zeta -= ds, multipole, exact drift -ds, zeta += ds.
  const Particles start = some_particles(transformed.reference().beta0());
  const Particles out = track_cpu(transformed, start);
  for (size_t i = 0; i < start.size(); ++i) {
    ParticleView p = start.view(i);
    auto exact_drift = [&](double length) {  // xtrack Drift_single_particle_exact
      const double opd = 1.0 + p.delta;
      const double one_over_pz = 1.0 / std::sqrt(opd * opd - p.px * p.px - p.py * p.py);
      const double dzeta = 1.0 - p.rv0v * opd * one_over_pz;
      p.x += p.px * one_over_pz * length;
      p.y += p.py * one_over_pz * length;
      p.zeta += dzeta * length;
    };
    exact_drift(ds);
    p.zeta += -ds;
    Particles one(1, start.beta0);
    one.store(0, p);
    one = track_cpu(plain, one);
    p = one.view(0);
    exact_drift(-ds);
    p.zeta += ds;
    CAPTURE(i);
    CHECK(out.x[i] == p.x);
    CHECK(out.px[i] == p.px);
    CHECK(out.y[i] == p.y);
    CHECK(out.py[i] == p.py);
    CHECK(out.zeta[i] == p.zeta);
  }
}

TEST_CASE("transformations: a misaligned exact drift is the same exact drift (rotations about x, y, s, shift_s, anchor)") {
  const double length = 2.5;
  const json drift = {{"type", "DriftExact"}, {"length", length}};
  const Lattice plain = lattice_of({{"d", drift}}, {"d"});
  const Particles start = some_particles(plain.reference().beta0());
  const Particles reference = track_cpu(plain, start);
  struct Case {
    const char* what;
    json fields;
  };
  const Case cases[] = {
      {"rot_y_rad", {{"rot_y_rad", 3e-3}}},
      {"rot_x_rad", {{"rot_x_rad", -2e-3}}},
      {"rot_s_rad + rot_s_rad_no_frame", {{"rot_s_rad", 0.4}, {"rot_s_rad_no_frame", -0.1}}},
      {"shift_s", {{"shift_s", 0.05}}},
      {"everything, anchored in the middle",
       {{"shift_x", 1e-3}, {"shift_y", -2e-3}, {"shift_s", 0.01}, {"rot_x_rad", 1e-3}, {"rot_y_rad", -2e-3},
        {"rot_s_rad", 0.2}, {"rot_s_rad_no_frame", 0.05}, {"rot_shift_anchor", length / 2}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    json moved = drift;
    for (const auto& [k, v] : c.fields.items()) moved[k] = v;
    const Lattice transformed = lattice_of({{"d", moved}}, {"d"});
    REQUIRE(transformed.transform(0) != nullptr);
    const Particles out = track_cpu(transformed, start);
    for (size_t i = 0; i < start.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(out.x[i] - reference.x[i]) < 1e-15);
      CHECK(std::fabs(out.px[i] - reference.px[i]) < 1e-16);
      CHECK(std::fabs(out.y[i] - reference.y[i]) < 1e-15);
      CHECK(std::fabs(out.py[i] - reference.py[i]) < 1e-16);
      CHECK(std::fabs(out.zeta[i] - reference.zeta[i]) < 1e-14);
    }
  }
}

TEST_CASE("transformations: a tilted and shifted aperture loses exactly the particles outside the moved shape") {
  // LimitRect |x| <= 10 mm, |y| <= 2 mm, moved by (3 mm, -1 mm) and tilted by 0.5 rad.
  const double dx = 3e-3, dy = -1e-3, psi = 0.5;
  const json rect = {{"type", "LimitRect"}, {"min_x", -10e-3}, {"max_x", 10e-3}, {"min_y", -2e-3}, {"max_y", 2e-3},
                     {"shift_x", dx},       {"shift_y", dy},   {"rot_s_rad", psi}};
  const Lattice lattice = lattice_of({{"aperture", rect}, {"m", {{"type", "Marker"}}}}, {"m", "aperture", "m"});
  // A grid of particles over +-15 mm; inside iff the point, in the rectangle's frame, is inside.
  const size_t n = 61;
  Particles start = make_grid(lattice.reference().beta0(), -15.3e-3, 15.3e-3, n, -15.3e-3, 15.3e-3, n, 0.0);
  const Particles out = track_cpu(lattice, start);
  size_t lost = 0, kept = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    const double u = std::cos(psi) * (start.x[i] - dx) + std::sin(psi) * (start.y[i] - dy);
    const double v = -std::sin(psi) * (start.x[i] - dx) + std::cos(psi) * (start.y[i] - dy);
    // Points within 1e-9 m of the edge could go either way by rounding: none is that close here.
    REQUIRE(std::fabs(std::fabs(u) - 10e-3) > 1e-9);
    REQUIRE(std::fabs(std::fabs(v) - 2e-3) > 1e-9);
    const bool inside = std::fabs(u) <= 10e-3 && std::fabs(v) <= 2e-3;
    CAPTURE(start.x[i]);
    CAPTURE(start.y[i]);
    CHECK((out.state[i] > 0) == inside);
    if (inside) {
      ++kept;
      // An aperture does not move particles: the way back restores them to rounding.
      CHECK(std::fabs(out.x[i] - start.x[i]) < 1e-17);
      CHECK(std::fabs(out.y[i] - start.y[i]) < 1e-17);
    } else {
      ++lost;
      CHECK(out.state[i] == kLostOnAperture);
      CHECK(out.lost_element[i] == 1);
    }
  }
  CHECK(kept > 100);
  CHECK(lost > 100);
  // Untilted, the same rectangle keeps a different set: the tilt matters.
  json plain = rect;
  plain.erase("rot_s_rad");
  const Particles untilted = track_cpu(lattice_of({{"aperture", plain}}, {"aperture"}), start);
  size_t differ = 0;
  for (size_t i = 0; i < start.size(); ++i) differ += (untilted.state[i] > 0) != (out.state[i] > 0);
  CHECK(differ > 50);
}

TEST_CASE("transformations: the global limit applies in the line's frame, after the way back") {
  // A marker shifted by 0.8 m with a global limit of 1 m: inside it the particle is at x - 0.8, so a
  // particle at x = 0.5 would be inside the limit there and is also inside it in the line's frame;
  // one at x = -0.5 is at -1.3 inside the element but at -0.5 outside: it survives, as in Xsuite,
  // whose global aperture check follows the element.
  const Lattice lattice = lattice_of({{"m", {{"type", "Marker"}, {"shift_x", 0.8}}}}, {"m"});
  Particles p(2, lattice.reference().beta0());
  p.set(0, 0.5, 0, 0, 0, 0, 0);
  p.set(1, -0.5, 0, 0, 0, 0, 0);
  const Particles out = track_cpu(lattice, p);
  CHECK(out.state[0] > 0);
  CHECK(out.state[1] > 0);
  CHECK(out.x[1] == -0.5);
}

TEST_CASE("transformations: the parameter block follows Xsuite's order of operations") {
  ElementTransformInput t;
  t.shift_x = 1e-3;
  t.rot_s_rad = 0.25;
  const std::vector<uint64_t> block = transform_block(t, 1.0, 0.0);
  // entry: shift_xy, rotate_s; exit: rotate_s(-psi), shift_xy(-dx)
  CHECK((block[0] & 0xffffffull) == (kTransformShiftXY | kTransformRotateS << 4));
  CHECK(((block[0] >> 24) & 0xffffffull) == (kTransformRotateS | kTransformShiftXY << 4));
  CHECK((block[0] >> 48) == block.size());
  CHECK(block.size() == 1 + 4 + 4);
  MESSAGE(describe_transform_block(block));
  // No operation for zero rotations or a zero shift_s: a shift alone is two shift_xy.
  ElementTransformInput shift_only;
  shift_only.shift_y = 2e-3;
  CHECK(transform_block(shift_only, 3.0, 0.0).size() == 1 + 2 + 2);
  // A thin element that bends cannot be transformed (Xsuite needs its h).
  CHECK_THROWS_AS(transform_block(t, 0.0, 0.1), std::invalid_argument);
}

TEST_CASE("transformations: lattice format, written back, bad values named") {
  const Lattice lattice = lattice_of(
      {{"q", {{"type", "Quadrupole"}, {"length", 1.0}, {"k1", 0.1}, {"shift_x", 1e-3}, {"rot_s_rad", 0.0}}},
       {"r", {{"type", "Quadrupole"}, {"length", 1.0}, {"k1", 0.1}, {"shift_x", 0.0}}}},
      {"q", "r"});
  REQUIRE(lattice.transform(0) != nullptr);
  CHECK(lattice.transform(0)->shift_x == 1e-3);
  CHECK(lattice.transform(1) == nullptr);  // all zero: no transformation, the plain fast path
  CHECK(lattice.has_transforms());
  const json written = lattice_to_json(lattice);
  CHECK(written["elements"]["q"]["shift_x"] == 1e-3);
  CHECK_FALSE(written["elements"]["q"].contains("rot_s_rad"));
  CHECK_FALSE(written["elements"]["r"].contains("shift_x"));
  const Lattice again = lattice_from_json(written, "again", ft::test::builtin_registry());
  REQUIRE(again.transform(0) != nullptr);
  CHECK(again.transform(0)->shift_x == 1e-3);

  const std::string not_number = ft::test::error_message([] {
    lattice_of({{"q", {{"type", "Marker"}, {"shift_y", "1 mm"}}}}, {"q"});
  });
  CHECK(not_number.find("transform_test") != std::string::npos);
  CHECK(not_number.find("'q'") != std::string::npos);
  CHECK(not_number.find("shift_y") != std::string::npos);
  CHECK(not_number.find("expected a number") != std::string::npos);
  const std::string unknown = ft::test::error_message([] {
    lattice_of({{"q", {{"type", "Marker"}, {"shift_z", 1e-3}}}}, {"q"});
  });
  CHECK(unknown.find("shift_z") != std::string::npos);
  CHECK(unknown.find("rot_s_rad") != std::string::npos);  // the generic fields are listed
}

}  // namespace test_element_transforms
