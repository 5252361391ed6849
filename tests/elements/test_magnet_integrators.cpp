// The thick magnets' integrator schedules (elements/magnet_integrators.h): the drifts and kicks that
// magnet_integrate performs, recorded by a body that only writes them down, against the schedules
// computed here from their definitions (Forest and Ruth's theta, xtrack's teapot weights, drift-kick-drift).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "magnet_integrators.h"

// The suite is compiled in unity files (tests/CMakeLists.txt): this file's names stay in test_magnet_integrators.
namespace test_magnet_integrators {

namespace {

struct Operation {
  char kind;     // 'D' drift of `value` metres, 'K' kick of weight `value`
  double value;
};

/// A magnet body that records its operations instead of moving the particle.
struct RecordingBody {
  std::vector<Operation>* operations;
  void drift(double s, ft::ParticleView&) const { operations->push_back({'D', s}); }
  void kick(double w, ft::ParticleView&) const { operations->push_back({'K', w}); }
};

std::vector<Operation> schedule(int integrator, int num_kicks, double length) {
  std::vector<Operation> operations;
  ft::ParticleView p = ft::make_particle(0, 0, 0, 0, 0, 0, 0.9);
  magnet_integrate(RecordingBody{&operations}, integrator, num_kicks, length, p);
  return operations;
}

void check_schedule(const std::vector<Operation>& got, const std::vector<Operation>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].kind == expected[i].kind);
    CHECK(got[i].value == doctest::Approx(expected[i].value).epsilon(1e-15));
  }
}

double sum_of(const std::vector<Operation>& ops, char kind) {
  double s = 0.0;
  for (const Operation& o : ops)
    if (o.kind == kind) s += o.value;
  return s;
}

}  // namespace

TEST_CASE("magnet integrators: Forest-Ruth steps are D(a1) K(b1) D(a2) K(b2) D(a2) K(b1) D(a1) with theta = 1/(2 - 2^(1/3))") {
  const double theta = 1.0 / (2.0 - std::cbrt(2.0));
  const double a1 = theta / 2, a2 = (1 - theta) / 2, b1 = theta, b2 = 1 - 2 * theta;
  const double length = 1.7;
  for (int steps : {1, 3, 10}) {
    CAPTURE(steps);
    const double h = length / steps, w = 1.0 / steps;
    std::vector<Operation> expected;
    for (int i = 0; i < steps; ++i)
      for (const Operation& o : {Operation{'D', a1 * h}, Operation{'K', b1 * w}, Operation{'D', a2 * h},
                                 Operation{'K', b2 * w}, Operation{'D', a2 * h}, Operation{'K', b1 * w},
                                 Operation{'D', a1 * h}})
        expected.push_back(o);
    check_schedule(schedule(FT_INTEGRATOR_FOREST_RUTH, steps, length), expected);
  }
}

TEST_CASE("magnet integrators: uniform is drift-kick-drift per kick, teapot xtrack's edge and inside drifts") {
  const double length = 2.0;
  for (int kicks : {1, 4}) {
    CAPTURE(kicks);
    std::vector<Operation> uniform;
    for (int i = 0; i < kicks; ++i)
      for (const Operation& o : {Operation{'D', 0.5 * length / kicks}, Operation{'K', 1.0 / kicks},
                                 Operation{'D', 0.5 * length / kicks}})
        uniform.push_back(o);
    check_schedule(schedule(FT_INTEGRATOR_UNIFORM, kicks, length), uniform);
    // Teapot: D(edge) [K D(inside)] x (n - 1) K D(edge), edge = L / (2 (n + 1)), inside = n L / (n^2 - 1).
    const double edge = kicks > 1 ? length / (2.0 * (kicks + 1)) : 0.5 * length;
    const double inside = kicks > 1 ? kicks * length / (kicks * kicks - 1.0) : 0.0;
    std::vector<Operation> teapot{{'D', edge}};
    for (int i = 0; i < kicks; ++i) {
      teapot.push_back({'K', 1.0 / kicks});
      teapot.push_back({'D', i + 1 < kicks ? inside : edge});
    }
    check_schedule(schedule(FT_INTEGRATOR_TEAPOT, kicks, length), teapot);
  }
}

TEST_CASE("magnet integrators: Yoshida slices of 7 kicks are symmetric, and drifts and kicks each sum to the whole") {
  const double length = 3.0;
  for (int kicks : {7, 14, 10}) {  // 10 kicks: 2 slices of 7
    CAPTURE(kicks);
    const int slices = (kicks + 6) / 7;
    const std::vector<Operation> ops = schedule(FT_INTEGRATOR_YOSHIDA, kicks, length);
    REQUIRE(ops.size() == static_cast<size_t>(15 * slices));
    for (int s = 0; s < slices; ++s)
      for (int o = 0; o < 15; ++o) {
        const Operation& a = ops[static_cast<size_t>(15 * s + o)];
        const Operation& mirror = ops[static_cast<size_t>(15 * s + 14 - o)];
        CHECK(a.kind == (o % 2 == 0 ? 'D' : 'K'));
        CHECK(a.value == mirror.value);
      }
    CHECK(sum_of(ops, 'D') == doctest::Approx(length).epsilon(1e-14));
    CHECK(sum_of(ops, 'K') == doctest::Approx(1.0).epsilon(1e-14));
  }
}

}  // namespace test_magnet_integrators
