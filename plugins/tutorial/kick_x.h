// KickX: a thin horizontal corrector, px += kick (px = P_x / P0). The smallest complete element:
// one field list, one struct, one per-particle function, one registration.
#pragma once
#include "fusetrack/device/element.h"

// The fields, declared once: the struct, the lattice-file reader and the documentation come from it.
#define FT_KICKX_FIELDS(REQUIRED, PARAM, ARRAY, DERIVED) \
  REQUIRED(double, kick, "rad", "integrated kick B L / (B rho) added to px")

FT_ELEMENT_STRUCT(KickX, FT_KICKX_FIELDS)

// The physics, for one particle. The same text runs on the CPU and, through NVRTC, on the GPU.
FT_FUNCTION void KickX_track(const KickX& e, ft::ParticleView& p) { p.px += e.kick; }

FT_REGISTER_ELEMENT(KickX, FT_KICKX_FIELDS, FT_THIN, FT_NO_PREPARE, "Thin horizontal corrector px += kick (tutorial)")
