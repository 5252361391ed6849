// Longitudinal impedance (collective element): the voltage induced by the whole bunch through a
// sum of impedance sources, applied as an energy kick
//   dE = q0 V(zeta) [eV],   V(t) = -q0 e N_bunch integral lambda(t') W(t - t') dt'  [V]
// (lambda the line density in arrival time t = -zeta / (beta0 c), W the wake function [V/C],
// Z(f) = integral W(t) exp(-2 pi i f t) dt the impedance [Ohm]; Chao, "Physics of Collective Beam
// Instabilities in High Energy Accelerators", Wiley 1993, ch. 2; BLonD, induced_voltage docs).
// The framework bins the bunch, convolves the profile with the wake samples (method "time") or
// multiplies its FFT with impedance samples (method "frequency") and interpolates V at each
// particle; this header supplies the response and the kick. Damped resonators also carry their
// wake from turn to turn (multi-turn memory, plugin_abi.h: ft_wake_mode).
//
// Host-only JSON fields (read by the host model, framework/src/collective/impedance_model.cpp):
//   "sources": [ {...}, ... ]  several at once, each with "type":
//     "Resonator"           r_shunt [Ohm], frequency [Hz], q [1], optional multi_turn (bool, true)
//     "InductiveImpedance"  z_over_n [Ohm] (Im Z / n)
//     "ImpedanceTable"      file: columns frequency [Hz], Re Z [Ohm], Im Z [Ohm]
//     "WakeTable"           file: columns time [s] (>= 0), W [V/C]
//   "method": "time" (default) or "frequency"
//   "deposition": "linear" (default) or "nearest"
//   "profile_filter": {"type": "gaussian", "cutoff_frequency": Hz}: optional Gaussian low-pass of the
//     line density (H = 1/sqrt(2) at the cutoff), against the shot noise of few macroparticles; the
//     derivative terms (inductive Z/n, broadband) otherwise amplify the noise of every slice
// Table paths are relative to the lattice file's directory.
//
// The kick adds q0 V / E0 to the energy through ParticleView::add_to_energy (ptau, delta, rpp,
// rvv follow), as xtrack's add_to_energy with pz_only = 1; prepare fills charge_over_energy0 =
// q0 / E0.
#pragma once
#include "fusetrack/device/element.h"

#define FT_LONGITUDINAL_IMPEDANCE_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                               \
  REQUIRED(int, n_slices, "1", "number of slices of the line density between the cuts (>= 2)")          \
  REQUIRED(double, zeta_min, "m", "lower cut of the slicing; particles below see no field")             \
  REQUIRED(double, zeta_max, "m", "upper cut of the slicing (> zeta_min)")                               \
  REQUIRED(double, intensity, "1", "real particles per bunch, spread over the macroparticles")          \
  PARAM(double, frequency_resolution, 0.0, "Hz",                                                        \
        "frequency method: the largest FFT bin spacing allowed; 0 = smallest zero-padded FFT")          \
  DERIVED(double, charge_over_energy0, "1/V", "q0 / E0: energy change over E0 per volt of induced voltage")

#define FT_LONGITUDINAL_IMPEDANCE_JSON_FIELDS(JSON)                                                     \
  JSON(sources, 1, "-",                                                                                 \
       "list of impedance sources: {type: Resonator, r_shunt [Ohm], frequency [Hz], q, multi_turn (true)}, " \
       "{type: InductiveImpedance, z_over_n [Ohm]}, {type: ImpedanceTable, file (f [Hz], Re Z, Im Z [Ohm])}, " \
       "{type: WakeTable, file (t [s], W [V/C])}; files relative to the lattice file")                  \
  JSON(method, 0, "-", "\"time\" (direct convolution of wake samples, default) or \"frequency\" (FFT)")    \
  JSON(deposition, 0, "-", "\"linear\" (cloud-in-cell, default) or \"nearest\" slice")                    \
  JSON(profile_filter, 0, "-",                                                                          \
       "optional low-pass filter of the line density against shot noise: {type: gaussian, "               \
       "cutoff_frequency [Hz] (-3 dB)}; H(f) = exp(-2 pi^2 f^2 sigma_t^2), applied to Z(f) or the wake")

FT_ELEMENT_STRUCT(LongitudinalImpedance, FT_LONGITUDINAL_IMPEDANCE_FIELDS)

#ifndef FT_DEVICE_COMPILE
#include <cstdio>
#include <stdexcept>

inline void LongitudinalImpedance_prepare(LongitudinalImpedance& e, const ft_reference& ref) {
  if (!(ref.energy0 > 0.0)) {
    char msg[160];
    std::snprintf(msg, sizeof(msg), "LongitudinalImpedance: reference energy0 = %.17g eV must be > 0", ref.energy0);
    throw std::invalid_argument(msg);
  }
  e.charge_over_energy0 = ref.q0 / ref.energy0;
}

/// Builds the host model (sources, wake and impedance samples, resonant modes); throws
/// std::invalid_argument naming the field on bad input. Defined in impedance_model.cpp.
void LongitudinalImpedance_create_model(const LongitudinalImpedance& e, const char* json_definition,
                                        const char* base_directory, const ft_reference& reference,
                                        ft_collective_model& model);
#endif

/// field: the induced voltage at the particle [V].
FT_FUNCTION void LongitudinalImpedance_kick(const LongitudinalImpedance& e, double field, ft::ParticleView& p) {
  p.add_to_energy(e.charge_over_energy0 * field);
}

FT_ELEMENT_COORDINATES(LongitudinalImpedance, FT_COORD_ZETA | FT_COORD_PTAU, FT_COORD_ENERGY)
FT_REGISTER_COLLECTIVE_ELEMENT(LongitudinalImpedance, FT_LONGITUDINAL_IMPEDANCE_FIELDS,
                               FT_LONGITUDINAL_IMPEDANCE_JSON_FIELDS, FT_WITH_PREPARE,
                               "Longitudinal impedance: induced voltage of the bunch from resonators, "
                               "inductive impedance and tables (Chao ch. 2; BLonD)")
