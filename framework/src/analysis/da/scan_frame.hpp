// The lattice-dependent frame of a DA scan and the scan built in it (internal to the DA sources).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fusetrack/da.h"

namespace ft::da_detail {

/// What a scan takes from its lattice: the reference's beta0, the beam sizes per unit amplitude and
/// the closed orbit (the optics at the start). The rest of a scan follows from the configuration.
struct DaFrame {
  double beta0 = 1.0;
  double sigma_x = 1.0, sigma_y = 1.0;
  double closed_orbit[6] = {0, 0, 0, 0, 0, 0};
};
constexpr size_t kFrameWords = 9;  // the doubles of a DaFrame, exchanged between ranks as bit patterns

inline void frame_to_words(const DaFrame& f, uint64_t* w) {
  const double d[kFrameWords] = {f.beta0,           f.sigma_x,         f.sigma_y,
                                 f.closed_orbit[0], f.closed_orbit[1], f.closed_orbit[2],
                                 f.closed_orbit[3], f.closed_orbit[4], f.closed_orbit[5]};
  std::memcpy(w, d, sizeof d);
}

inline DaFrame frame_from_words(const uint64_t* w) {
  double d[kFrameWords];
  std::memcpy(d, w, sizeof d);
  DaFrame f;
  f.beta0 = d[0];
  f.sigma_x = d[1];
  f.sigma_y = d[2];
  std::copy(d + 3, d + 9, f.closed_orbit);
  return f;
}

/// The lattice-dependent part of make_da_scan (the CPU work of a study's set-up: closed orbit and
/// optics). Throws for a collective element, a lattice without a closed orbit or finite beam sizes.
DaFrame da_frame(const Lattice& lattice, const DaConfig& config);

/// The scan of `config` in a lattice's frame: the grid and the initial conditions around its closed orbit.
DaScan da_scan_in_frame(const DaFrame& frame, const DaConfig& config);

}  // namespace ft::da_detail
