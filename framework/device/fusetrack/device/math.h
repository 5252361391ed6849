// Transcendental functions for element code. Elements call ft_sin, ft_exp, ... and never the
// C library directly, so that the numerics mode decides what runs:
//  - CPU (always) and GPU with fma=off: fusetrack's portable implementations
//    (portable_math.h), built only from + - * / sqrt and exact bit operations, so the host
//    compiler and NVRTC produce bit-identical results when contraction is off;
//  - GPU with fma=on: the codegen defines FT_DEVICE_FAST_MATH and the CUDA math library runs.
// sqrt and division are IEEE-correctly rounded on both sides and are used directly.
#pragma once
#include "fusetrack/device/portable_math.h"
#include "fusetrack/device/qualifiers.h"

#if defined(FT_DEVICE_COMPILE) && defined(FT_DEVICE_FAST_MATH)
FT_FUNCTION double ft_sin(double x) { return sin(x); }
FT_FUNCTION double ft_cos(double x) { return cos(x); }
FT_FUNCTION void ft_sincos(double x, double* s, double* c) { sincos(x, s, c); }
FT_FUNCTION double ft_tan(double x) { return tan(x); }
FT_FUNCTION double ft_asin(double x) { return asin(x); }
FT_FUNCTION double ft_acos(double x) { return acos(x); }
FT_FUNCTION double ft_atan(double x) { return atan(x); }
FT_FUNCTION double ft_atan2(double y, double x) { return atan2(y, x); }
FT_FUNCTION double ft_exp(double x) { return exp(x); }
FT_FUNCTION double ft_log(double x) { return log(x); }
FT_FUNCTION double ft_sinh(double x) { return sinh(x); }
FT_FUNCTION double ft_cosh(double x) { return cosh(x); }
#else
FT_FUNCTION double ft_sin(double x) { return ft::portable::sin(x); }
FT_FUNCTION double ft_cos(double x) { return ft::portable::cos(x); }
/// sin and cos of one argument with one reduction, bit-identical to ft_sin and ft_cos.
FT_FUNCTION void ft_sincos(double x, double* s, double* c) { ft::portable::sincos(x, s, c); }
FT_FUNCTION double ft_tan(double x) { return ft::portable::tan(x); }
FT_FUNCTION double ft_asin(double x) { return ft::portable::asin(x); }
FT_FUNCTION double ft_acos(double x) { return ft::portable::acos(x); }
FT_FUNCTION double ft_atan(double x) { return ft::portable::atan(x); }
FT_FUNCTION double ft_atan2(double y, double x) { return ft::portable::atan2(y, x); }
FT_FUNCTION double ft_exp(double x) { return ft::portable::exp(x); }
FT_FUNCTION double ft_log(double x) { return ft::portable::log(x); }
FT_FUNCTION double ft_sinh(double x) { return ft::portable::sinh(x); }
FT_FUNCTION double ft_cosh(double x) { return ft::portable::cosh(x); }
#endif
