// The one lock around FFTW's planner. FFTW's planning (fftw_plan_*, fftw_destroy_plan) is not
// thread-safe while executing a plan is; every FFTW user of the library (impedance solvers, the
// Poisson solver, tunes from tracking, collider spectra) plans under this lock, so solvers built on
// different threads cannot plan at the same time. An inline function: one mutex for the library.
#pragma once
#include <mutex>

namespace ft {

inline std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace ft
