// Thick corrector (kicker): uniform horizontal and vertical dipole fields over a length, total
// kicks hkick, vkick (px += hkick, py += vkick: B L / (B rho0), independent of delta, the MAD-X
// and AT convention). Exact flow of H = (px^2 + py^2) / (2 (1 + delta)) - (hkick x + vkick y) / L:
//   px(s) = px + hkick s / L,   x(L) = x + L (px + hkick / 2) / (1 + delta),
//   zeta += L - (L + int_0^L (px(s)^2 + py(s)^2) ds / (2 (1 + delta)^2)) / rvv,
//   int_0^L px(s)^2 ds = L (px^2 + px hkick + hkick^2 / 3)   (likewise y).
// This is AT's CorrectorPass (the same path-length term); with length 0 it is a thin kick.
// Exact, hence symplectic; the inverse is the element with -length, -hkick, -vkick.
#pragma once
#include "fusetrack/device/element.h"

#define FT_CORRECTOR_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED)                     \
  REQUIRED(double, length, "m", "magnetic length (0: thin kick)")                \
  PARAM(double, hkick, 0.0, "rad", "horizontal kick added to px over the length") \
  PARAM(double, vkick, 0.0, "rad", "vertical kick added to py over the length")

FT_ELEMENT_STRUCT(Corrector, FT_CORRECTOR_FIELDS)

FT_FUNCTION void Corrector_track(const Corrector& e, ft::ParticleView& p) {
  const double L = e.length;
  const double px = p.px;
  const double py = p.py;
  const double int_p2 = L * (px * px + px * e.hkick + e.hkick * e.hkick / 3.0 + py * py + py * e.vkick +
                             e.vkick * e.vkick / 3.0);
  p.x += L * (px + 0.5 * e.hkick) * p.rpp;
  p.y += L * (py + 0.5 * e.vkick) * p.rpp;
  p.zeta += L - (L + 0.5 * int_p2 * p.rpp * p.rpp) * p.rv0v;
  p.px = px + e.hkick;
  p.py = py + e.vkick;
}

FT_ELEMENT_COORDINATES(Corrector, FT_COORD_ALL, FT_COORD_TRANSVERSE | FT_COORD_ZETA)
FT_REGISTER_ELEMENT(Corrector, FT_CORRECTOR_FIELDS, FT_THICK, FT_NO_PREPARE,
                    "Thick corrector: uniform dipole fields giving hkick, vkick over the length (AT CorrectorPass)")
