// The deterministic reductions of fusetrack/reduction.h on the GPU: the same per-particle steps
// (fusetrack/device/reduction.h), compiled by NVRTC, summed with 64-bit integer atomics (no
// floating-point atomics), so the integers equal the CPU's bit for bit (fma off).
#pragma once
#include "fusetrack/particles.h"
#include "fusetrack/reduction.h"

namespace ft {

/// Deposits the alive particles into `reducer` on GPU `device` (adds to what it holds). Throws
/// DeviceError when no GPU is usable. `kernel_seconds` (optional): the deposit kernel's time.
void gpu_deposit(SliceMomentReducer& reducer, const Particles& particles, int device = 0,
                 double* kernel_seconds = nullptr);
void gpu_deposit(ChargeGridReducer& reducer, const Particles& particles, int device = 0,
                 double* kernel_seconds = nullptr);

}  // namespace ft
