# Run-time options of the sanitizer build (preset "asan"): source this before ctest or a fuzzer.
#   source tools/sanitizer/env.sh && ctest --preset asan
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# protect_shadow_gap=0: the CUDA driver maps memory where ASan keeps its shadow gap (GPU runs under ASan).
# detect_odr_violation=0: libnvrtc and libcufft carry their own copies of some symbols.
export ASAN_OPTIONS="protect_shadow_gap=0:detect_odr_violation=0:detect_leaks=1:abort_on_error=0:allocator_may_return_null=0:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$dir/ubsan.supp"
