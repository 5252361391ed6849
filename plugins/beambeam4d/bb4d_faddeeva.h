// The Faddeeva function w(z) for the Bassetti-Erskine field of beam_beam_4d.h: the implementation
// (Weideman 1994, N = 40) moved to the framework device header fusetrack/device/faddeeva.h, which the
// strong-strong beam-beam code (fusetrack/device/beambeam6d.h) shares; this name stays for the plugin.
#pragma once
#include "fusetrack/device/faddeeva.h"

/// w(x + i y) for y >= 0: real part in wr, imaginary part in wi (see fusetrack/device/faddeeva.h).
FT_FUNCTION void bb4d_faddeeva_w(double x, double y, double& wr, double& wi) { ft_faddeeva_w(x, y, wr, wi); }
