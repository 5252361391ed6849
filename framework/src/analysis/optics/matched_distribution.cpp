// Matched Gaussian particle distributions from the linear optics (make_gaussian, gaussian_bunch).
#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <random>

#include "analysis/optics/optics_internal.hpp"
#include "core/math_helpers.hpp"
#include "fusetrack/error.h"

namespace ft {

namespace {

/// Reproducible standard normal numbers: std::mt19937_64 (fully specified by the standard) and
/// Box-Muller, unlike std::normal_distribution whose algorithm is implementation-defined.
class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : m_rng(seed) {}
  double operator()() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    m_spare = r * std::sin(2.0 * kPi * u2);
    m_has_spare = true;
    return r * std::cos(2.0 * kPi * u2);
  }

 private:
  double uniform() {  // in (0, 1)
    return (static_cast<double>(m_rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }
  std::mt19937_64 m_rng;
  double m_spare = 0.0;
  bool m_has_spare = false;
};

/// make_gaussian's and gaussian_bunch's checks of their inputs.
void check_gaussian_inputs(const LinearOptics& optics, double eps_nx, double eps_ny, double sigma_zeta,
                           double sigma_delta) {
  const struct {
    const char* name;
    double value;
  } checks[] = {{"eps_nx", eps_nx}, {"eps_ny", eps_ny}, {"sigma_zeta", sigma_zeta}, {"sigma_delta", sigma_delta}};
  for (const auto& c : checks)
    if (!(c.value >= 0.0) || !std::isfinite(c.value)) {
      InputLocation at;
      at.field = c.name;
      throw InputError(at, fmt::format("must be a finite number >= 0, got {}", c.value));
    }
  if (!(optics.beta_x > 0.0) || !(optics.beta_y > 0.0))
    throw InputError(InputLocation{}, "make_gaussian: the optics have no stable Twiss parameters (beta_x, beta_y)");
}

}  // namespace

Particles make_gaussian(const Lattice& lattice, const LinearOptics& optics, size_t n, double eps_nx, double eps_ny,
                        double sigma_zeta, double sigma_delta, uint64_t seed) {
  return make_gaussian(lattice.reference(), optics, n, eps_nx, eps_ny, sigma_zeta, sigma_delta, seed);
}

Particles make_gaussian(const ReferenceParticle& reference, const LinearOptics& optics, size_t n, double eps_nx,
                        double eps_ny, double sigma_zeta, double sigma_delta, uint64_t seed) {
  check_gaussian_inputs(optics, eps_nx, eps_ny, sigma_zeta, sigma_delta);
  const double bg = reference.beta0() * reference.gamma0();
  const double ex = eps_nx / bg, ey = eps_ny / bg;  // geometric emittances [m rad]
  const double sbx = std::sqrt(optics.beta_x), sby = std::sqrt(optics.beta_y);
  const auto& co = optics.closed_orbit;
  NormalGenerator g(seed);
  Particles p(n, reference.beta0());
  for (size_t i = 0; i < n; ++i) {
    const double xh = std::sqrt(ex) * g(), pxh = std::sqrt(ex) * g();
    const double yh = std::sqrt(ey) * g(), pyh = std::sqrt(ey) * g();
    const double dz = sigma_zeta * g(), dd = sigma_delta * g();
    p.set(i, co[0] + sbx * xh + optics.dx * dd, co[1] + (pxh - optics.alpha_x * xh) / sbx + optics.dpx * dd,
          co[2] + sby * yh + optics.dy * dd, co[3] + (pyh - optics.alpha_y * yh) / sby + optics.dpy * dd, co[4] + dz,
          co[5] + dd);
  }
  return p;
}

ft_gaussian_bunch gaussian_bunch(const ReferenceParticle& reference, const LinearOptics& optics, double eps_nx,
                                 double eps_ny, double sigma_zeta, double sigma_delta) {
  check_gaussian_inputs(optics, eps_nx, eps_ny, sigma_zeta, sigma_delta);
  const double bg = reference.beta0() * reference.gamma0();
  ft_gaussian_bunch b{};
  b.sqrt_emittance_x = std::sqrt(eps_nx / bg), b.sqrt_emittance_y = std::sqrt(eps_ny / bg);
  b.sqrt_beta_x = std::sqrt(optics.beta_x), b.alpha_x = optics.alpha_x;
  b.sqrt_beta_y = std::sqrt(optics.beta_y), b.alpha_y = optics.alpha_y;
  b.dx = optics.dx, b.dpx = optics.dpx, b.dy = optics.dy, b.dpy = optics.dpy;
  b.sigma_zeta = sigma_zeta, b.sigma_delta = sigma_delta;
  for (size_t k = 0; k < 6; ++k) b.orbit[k] = optics.closed_orbit[k];
  b.beta0 = reference.beta0();
  return b;
}

Particles sample_gaussian_bunch(const ft_gaussian_bunch& bunch, uint64_t seed, size_t first, size_t count,
                                int threads) {
  Particles p(count, bunch.beta0);
  const long long n = static_cast<long long>(count);
#pragma omp parallel for schedule(static) num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (long long k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k);
    p.store(i, ft_gaussian_bunch_particle(bunch, seed, static_cast<unsigned long long>(first + i)));
    p.id[i] = static_cast<int64_t>(first + i);
  }
  return p;
}

}  // namespace ft
