// Thin RF multipole (xtrack RFMultipole; crab cavities are its order-0 skew or normal term):
// with tau = zeta / beta0, w = 2 pi f / c and, for n = 0 .. order,
//   phi_n = pn[n] pi/180 + phase_n[n] - w tau,   psi_n = ps[n] pi/180 + phase_s[n] - w tau,
//   b_n = knl[n] / n!,   a_n = ksl[n] / n!,   z = x + i y,
// the kicks are
//   px -= sum_n cos(phi_n) b_n Re z^n - cos(psi_n) a_n Im z^n
//   py += sum_n cos(psi_n) a_n Re z^n + cos(phi_n) b_n Im z^n
//   dE  = |q0| [ V sin(lag pi/180 + phase - w tau)
//               - w p0c sum_n ( sin(phi_n) b_n Re z^(n+1) - sin(psi_n) a_n Im z^(n+1) ) ]
// and dE is applied with ParticleView::add_to_energy(dE / E0) (px, py kept), with x, y taken
// before the kick. This is xtrack's kick as written (track_rf.h, track_rf_kick_single_particle,
// one kick of weight 1, chi = 1): note that for n >= 1 its energy term carries 1/n! where a kick
// derived from one potential (Panofsky-Wenzel) would carry 1/(n+1)!, so only the order-0 terms
// (crab cavities) are symplectic; fusetrack follows Xsuite so that imported lines track as there.
// Sources: xtrack/beam_elements/elements_src/rfmultipole.h, track_rf.h,
// xtrack/beam_elements/rf_multipole.py. Not modelled: absolute_time (the importer refuses it).
#pragma once
#include "fusetrack/device/element.h"

#define FT_RF_MULTIPOLE_MAX_ORDER 5

#define FT_RF_MULTIPOLE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                            \
  PARAM(double, voltage, 0.0, "V", "longitudinal voltage")                                                  \
  PARAM(double, frequency, 0.0, "Hz", "RF frequency")                                                       \
  PARAM(double, lag, 0.0, "deg", "longitudinal phase in degrees, added to phase")                           \
  PARAM(double, phase, 0.0, "rad", "longitudinal phase seen by the reference particle")                     \
  ARRAY(double, knl, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "m^-n", "integrated normal strengths K_n L")       \
  ARRAY(double, ksl, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "m^-n", "integrated skew strengths J_n L")         \
  ARRAY(double, pn, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "deg", "phases of the normal terms in degrees")     \
  ARRAY(double, ps, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "deg", "phases of the skew terms in degrees")       \
  ARRAY(double, phase_n, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "rad", "phases of the normal terms, added to pn") \
  ARRAY(double, phase_s, FT_RF_MULTIPOLE_MAX_ORDER + 1, 0.0, "rad", "phases of the skew terms, added to ps")  \
  PARAM(int, order, -1, "1", "highest order of the sum; -1: the highest non-zero knl/ksl")                  \
  DERIVED(int, kick_order, "1", "order used by the kick (-1: no multipole terms)")                           \
  DERIVED(double, wave_number, "m^-1", "w = 2 pi f / c")                                                    \
  DERIVED(double, wave_p0c, "eV m^-1", "w p0c")                                                             \
  DERIVED(double, charge_over_e0, "eV^-1", "|q0| / E0")                                                     \
  DERIVED(double, phi0, "rad", "lag pi/180 + phase")

FT_ELEMENT_STRUCT(RFMultipole, FT_RF_MULTIPOLE_FIELDS)

#define FT_RF_MULTIPOLE_DEG2RAD 0.017453292519943295  // pi / 180, as xtrack's DEG2RAD

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void RFMultipole_prepare(RFMultipole& e, const ft_reference& ref) {
  char msg[200];
  if (e.order < -1 || e.order > FT_RF_MULTIPOLE_MAX_ORDER) {
    std::snprintf(msg, sizeof(msg), "RFMultipole: order = %d is outside [-1, %d]", e.order, FT_RF_MULTIPOLE_MAX_ORDER);
    throw std::invalid_argument(msg);
  }
  e.kick_order = e.order;
  if (e.order < 0) {
    e.kick_order = -1;
    for (int n = 0; n <= FT_RF_MULTIPOLE_MAX_ORDER; ++n)
      if (e.knl[n] != 0.0 || e.ksl[n] != 0.0) e.kick_order = n;
  }
  for (int n = e.kick_order + 1; n <= FT_RF_MULTIPOLE_MAX_ORDER; ++n) {
    if (e.knl[n] != 0.0 || e.ksl[n] != 0.0) {
      std::snprintf(msg, sizeof(msg), "RFMultipole: knl[%d] or ksl[%d] is non-zero but order = %d", n, n, e.order);
      throw std::invalid_argument(msg);
    }
  }
  if (!(e.frequency >= 0.0)) {
    std::snprintf(msg, sizeof(msg), "RFMultipole: frequency = %.17g Hz must be >= 0", e.frequency);
    throw std::invalid_argument(msg);
  }
  if (!(ref.energy0 > 0.0) || !(ref.beta0 > 0.0)) throw std::invalid_argument("RFMultipole: needs a reference with energy0 > 0");
  const double pi = 3.141592653589793, c_light = 299792458.0;
  e.wave_number = (2.0 * pi) / c_light * e.frequency;
  e.wave_p0c = e.frequency * (2.0 * pi / c_light) * ref.p0c;
  e.charge_over_e0 = std::fabs(ref.q0) / ref.energy0;
  e.phi0 = FT_RF_MULTIPOLE_DEG2RAD * e.lag + e.phase;
}
#endif

FT_FUNCTION void RFMultipole_track(const RFMultipole& e, ft::ParticleView& p) {
  const double tau = p.zeta / p.beta0;
  const double wt = e.wave_number * tau;
  double energy = e.voltage * ft_sin(e.phi0 - wt);
  if (e.kick_order >= 0) {
    const double x = p.x, y = p.y;
    double dpx = 0.0, dpy = 0.0, dptr = 0.0, zre = 1.0, zim = 0.0, factorial = 1.0;
    for (int n = 0; n <= e.kick_order; ++n) {
      if (n > 0) factorial *= n;
      const double phi_n = FT_RF_MULTIPOLE_DEG2RAD * e.pn[n] + e.phase_n[n] - wt;
      const double psi_n = FT_RF_MULTIPOLE_DEG2RAD * e.ps[n] + e.phase_s[n] - wt;
      const double b_n = e.knl[n] / factorial;
      const double a_n = e.ksl[n] / factorial;
      double cn, cs, sn, ss;
      ft_sincos(phi_n, &sn, &cn);
      ft_sincos(psi_n, &ss, &cs);
      dpx += cn * (b_n * zre) - cs * (a_n * zim);
      dpy += cs * (a_n * zre) + cn * (b_n * zim);
      const double zre_next = zre * x - zim * y;
      zim = zim * x + zre * y;
      zre = zre_next;
      dptr += sn * (b_n * zre) - ss * (a_n * zim);
    }
    energy += -(e.wave_p0c * dptr);
    p.px += -dpx;
    p.py += dpy;
  }
  p.add_to_energy(e.charge_over_e0 * energy);
}

FT_ELEMENT_COORDINATES(RFMultipole, FT_COORD_TRANSVERSE | FT_COORD_ZETA | FT_COORD_PTAU, FT_COORD_PX | FT_COORD_PY | FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(RFMultipole, FT_RF_MULTIPOLE_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Thin RF multipole and crab cavity kick (xtrack RFMultipole)")
