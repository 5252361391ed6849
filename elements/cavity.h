// Thin RF cavity (xtrack Cavity, kick only), energy kick
//   dE = |q0| V sin(phi),  phi = lag pi/180 + phase - 2 pi f zeta / (beta0 c)
// (zeta = s - beta0 c t, so tau = zeta / beta0 and a particle ahead of the reference, zeta > 0,
// arrives earlier and sees a phase smaller by 2 pi f tau / c), applied with
// ParticleView::add_to_energy(dE / E0) (ptau beta0 += dE / E0; delta, rpp, rvv follow;
// px, py kept, as xtrack add_to_energy with pz_only = 1). As in xtrack the charge enters as |q0|.
// When `harmonic` != 0, f = harmonic / T_rev with T_rev = circumference / (beta0 c)
// (xtrack: frequency += harmonic / t_rev0; Xsuite forbids frequency and harmonic both non-zero).
// Prepare fills energy_kick = |q0| V / E0, k_rf = 2 pi f / (beta0 c), phi0 = lag pi/180 + phase.
// Sources: xtrack/beam_elements/elements_src/cavity.h, track_rf.h (track_rf_kick_single_particle),
// xtrack/beam_elements/cavity.py, xtrack/particles/local_particle_custom_api.h
// (LocalParticle_add_to_energy). Not modelled: xtrack's length (thick cavity), absolute_time,
// lag_taper/phase_taper.
#pragma once
#include "fusetrack/device/element.h"

#define FT_CAVITY_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                                             \
  REQUIRED(double, voltage, "V", "peak voltage")                                                       \
  PARAM(double, frequency, 0.0, "Hz", "RF frequency; must be 0 when harmonic is used")                  \
  PARAM(double, lag, 0.0, "deg", "phase at zeta = 0 in degrees (xtrack lag); 180 is stable above transition") \
  PARAM(double, phase, 0.0, "rad", "phase at zeta = 0 in radians, added to lag (xtrack phase)")       \
  PARAM(double, harmonic, 0.0, "1", "harmonic number; 0 means use frequency")                         \
  DERIVED(double, energy_kick, "1", "|q0| V / E0: energy-kick amplitude over the reference energy")     \
  DERIVED(double, k_rf, "m^-1", "RF wave number 2 pi f / (beta0 c)")                                    \
  DERIVED(double, phi0, "rad", "lag pi/180 + phase")

FT_ELEMENT_STRUCT(Cavity, FT_CAVITY_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cmath>
#include <cstdio>
#include <stdexcept>
inline void Cavity_prepare(Cavity& e, const ft_reference& ref) {
  const double c_light = 299792458.0;
  const double pi = 3.141592653589793;
  const double deg2rad = 0.017453292519943295;  // pi / 180, as xtrack's DEG2RAD
  char msg[256];
  if (!(ref.energy0 > 0.0) || !(ref.beta0 > 0.0)) {
    std::snprintf(msg, sizeof(msg), "Cavity: reference energy0 = %.17g eV and beta0 = %.17g must be > 0",
                  ref.energy0, ref.beta0);
    throw std::invalid_argument(msg);
  }
  double f = e.frequency;
  if (e.harmonic != 0.0) {
    if (e.frequency != 0.0) {
      std::snprintf(msg, sizeof(msg), "Cavity: frequency = %.17g Hz and harmonic = %.17g are both non-zero; set only one",
                    e.frequency, e.harmonic);
      throw std::invalid_argument(msg);
    }
    if (!(ref.circumference > 0.0)) {
      std::snprintf(msg, sizeof(msg),
                    "Cavity: harmonic = %.17g needs a positive lattice circumference, got %.17g m",
                    e.harmonic, ref.circumference);
      throw std::invalid_argument(msg);
    }
    const double t_rev0 = ref.circumference / (ref.beta0 * c_light);
    f = e.harmonic / t_rev0;
  } else if (e.frequency == 0.0 && e.voltage != 0.0) {
    std::snprintf(msg, sizeof(msg), "Cavity: voltage = %.17g V but frequency and harmonic are both 0", e.voltage);
    throw std::invalid_argument(msg);
  }
  e.energy_kick = std::fabs(ref.q0) * e.voltage / ref.energy0;
  e.k_rf = 2.0 * pi * f / (ref.beta0 * c_light);
  e.phi0 = deg2rad * e.lag + e.phase;
}
#endif

FT_FUNCTION void Cavity_track(const Cavity& e, ft::ParticleView& p) {
  p.add_to_energy(e.energy_kick * ft_sin(e.phi0 - e.k_rf * p.zeta));
}

FT_ELEMENT_COORDINATES(Cavity, FT_COORD_ZETA | FT_COORD_PTAU, FT_COORD_ENERGY)
FT_REGISTER_ELEMENT(Cavity, FT_CAVITY_FIELDS, FT_THIN, FT_WITH_PREPARE,
                    "Thin RF cavity, dE = |q0| V sin(lag - 2 pi f zeta / (beta0 c)) (xtrack Cavity)")
