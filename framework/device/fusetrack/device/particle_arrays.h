// The particle arrays as the generated kernels take them: one device pointer per array, in the order of
// the CUDA backend's DeviceParticles (src/backends/cuda_device_particles.h), passed by value.
#pragma once

struct FtParticleArrays {
  double* x;
  double* px;
  double* y;
  double* py;
  double* zeta;
  double* delta;
  double* ptau;
  double* rpp;
  double* rvv;
  int* state;
  int* lost_turn;
  long long* lost_element;
};
