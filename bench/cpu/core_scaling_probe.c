/* How many cores does this machine really give one process? Each OpenMP thread runs the same
 * fixed chain of dependent floating-point operations (no memory traffic); with T truly
 * independent cores, T threads take as long as one. Prints the speed-up for 1..max threads.
 * Build: cc -O2 -fopenmp cpu_scaling_probe.c -o probe */
#include <omp.h>
#include <stdio.h>

static double work(long n) {
  double a = 1.0, b = 0.5;
  for (long i = 0; i < n; ++i) {
    a = a * 0.999999 + b;
    b = b * 0.999998 + 1e-9 * a;
  }
  return a + b;
}

int main(void) {
  const long n = 200000000L;
  const int max_threads = omp_get_max_threads();
  double t1 = 0.0, sink = 0.0;
  for (int t = 1; t <= max_threads; t *= 2) {
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(t) reduction(+ : sink)
    sink += work(n);
    const double dt = omp_get_wtime() - t0;
    if (t == 1) t1 = dt;
    printf("threads %2d: %.3f s, aggregate speed-up %.2fx\n", t, dt, t * t1 / dt);
  }
  return sink == 0.0;
}
