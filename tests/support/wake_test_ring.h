// The ring of the transverse-wake tests: two thin-quadrupole FODO cells (qf_half, d, qd, d, qf_half) of
// 2 x 40 m each (160 m), protons, with chosen elements at the start (the middle of a focusing quadrupole,
// alpha = 0), and its beta and tune from the thin-lens matrices (independently of the tracker).
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace ft::test {

inline nlohmann::ordered_json wake_ring_reference(double p0c = 26e9) {
  return {{"mass0", 938272088.16}, {"q0", 1}, {"p0c", p0c}};
}

/// The ring's lattice document with `elements_in` added, the names in `first` at its start and, if given, the
/// element `after_first_qd` after the first cell's qd.
inline nlohmann::ordered_json wake_test_ring(const nlohmann::ordered_json& elements_in,
                                             const nlohmann::ordered_json& first, double k1l_qf_half, double k1l_qd,
                                             double p0c = 26e9, const char* after_first_qd = nullptr) {
  nlohmann::ordered_json elements = elements_in;
  elements["qf_half"] = {{"type", "Multipole"}, {"knl", {0.0, k1l_qf_half}}};
  elements["qd"] = {{"type", "Multipole"}, {"knl", {0.0, k1l_qd}}};
  elements["d"] = {{"type", "Drift"}, {"length", 40.0}};
  nlohmann::ordered_json sequence = first;
  for (int cell = 0; cell < 2; ++cell)
    for (const char* e : {"qf_half", "d", "qd", "d", "qf_half"}) {
      sequence.push_back(e);
      if (cell == 0 && after_first_qd && std::string(e) == "qd") sequence.push_back(after_first_qd);
    }
  return {{"fusetrack_lattice", 1},
          {"description", "transverse wake test ring"},
          {"reference", wake_ring_reference(p0c)},
          {"elements", elements},
          {"sequence", sequence}};
}

/// beta and the tune at the ring's start in the plane with focusing sign (+1: x, -1: y), from the one-turn
/// matrix of the thin lenses; alpha = 0 there by symmetry.
inline void wake_test_ring_optics(double k1l_qf_half, double k1l_qd, int sign, double* beta, double* tune) {
  auto mul = [](const double a[4], const double b[4], double out[4]) {
    const double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                         a[2] * b[1] + a[3] * b[3]};
    for (int k = 0; k < 4; ++k) out[k] = r[k];
  };
  const double qf[4] = {1, 0, -sign * k1l_qf_half, 1}, qd[4] = {1, 0, -sign * k1l_qd, 1}, d[4] = {1, 40.0, 0, 1};
  double m[4] = {1, 0, 0, 1};
  for (int c = 0; c < 2; ++c)
    for (const double* e : {qf, d, qd, d, qf}) mul(e, m, m);
  const double cos_mu = 0.5 * (m[0] + m[3]);
  const double sin_mu = std::sqrt(1.0 - cos_mu * cos_mu) * (m[1] > 0 ? 1.0 : -1.0);
  *beta = m[1] / sin_mu;
  *tune = std::acos(cos_mu) / (2.0 * 3.14159265358979323846);
}

}  // namespace ft::test
