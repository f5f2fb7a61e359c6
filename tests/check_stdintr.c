/* SPDX-License-Identifier: MIT */
/* tests/check_stdintr.c: Sarek's standard intrinsics, built in (proto/IR.md
 * "Sarek standard library"), run on every device the daemon serves.
 *
 * One kernel, built here as an IR document, applies every standard
 * intrinsic to its own vector of inputs (edge cases: zeros of both signs,
 * infinities, NaN, out-of-domain values, extremes of the integer types);
 * the results are compared with the C library computed here: the float
 * functions within the ULP bound IR.md states for each (against the
 * function evaluated in the next wider type and rounded, so that the bound
 * is the device's error, not glibc's), the exact ones (sqrt, fma, fmod,
 * conversions, arithmetic...) bit for bit, the integer ones exactly.
 * Denormal inputs are left out: flushing them is a compiler setting.
 *
 * Then: the generated source (helpers once, only when used), the
 * registry's view (intrinsics.list and .find) and what a registration of a
 * standard name does (it shadows it for its session; a core name is
 * EEXIST).
 */
#include "config.h"

#include <check.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hipd.h"
#include "ir_json.h"
#define MAX_DEVICES 64
#define TESTUTIL_CLIENT "check_stdintr"
#define TESTUTIL_TIMEOUT_MS 120000
#define TESTUTIL_MAX_DEVICES MAX_DEVICES
#include "run.h"
#include "testutil.h"

static harness_daemon_t *shared;

enum { N = 16 }; /* inputs per intrinsic: one thread each */

/* ---------------------------------------------------------------- inputs */

/* The input domains. */
enum {
  D_F,    /* floats: specials, zeros, out of domain, huge, tiny */
  D_FINT, /* floats in the range of int32, no NaN */
  D_I,    /* int32 extremes */
  D_IAR,  /* int32 pairs that do not overflow +, -, * */
  D_IDIV, /* int32 pairs, divisor not 0 (nor -1 for INT_MIN) */
  D_ISH,  /* int32 shifted by 0..31 */
  D_IABS, /* int32 but INT_MIN */
  D_IPOW, /* spoc_powint's base and exponent */
  D_L,    /* int64 extremes */
  D_LAR,  /* int64 pairs that do not overflow */
  D_LDIV, /* int64 divisions */
  D_LSH,  /* int64 shifted by 0..63 */
  D_LABS, /* int64 but INT64_MIN */
  D_D2F,  /* doubles to round to float */
};

static const double F_IN[3][N] = {
    {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.14159274, 1e-30, 1e4, -1e30, 100.0,
     7.25, INFINITY, -INFINITY, NAN, 0.1},
    {2.0, -0.5, 0.0, 1.0, 3.0, -1.0, 0.5, 1e-30, 2.5, 3.0, -INFINITY, 1.0, 0.1,
     10.0, NAN, -7.0},
    {1.25, 0.0, -1.0, 1e30, -0.0, 0.5, -3.0, 2.0, INFINITY, 1.0, 0.0, -0.25,
     1.0, -2.0, 1.0, NAN},
};
static const double FINT_IN[N] = {
    0.0,         -0.0,         1.5,   -1.5,   2.5,     -2.99, 1e9,     -1e9,
    2147483520., -2147483648., 0.999, -0.999, 123.456, 7.0,   65536.5, -3.5};
static const int64_t I_IN[2][N] = {
    {0, 1, -1, 7, -7, 123456, -123456, INT32_MAX, INT32_MIN, 2, 3, 1000, -1000,
     65536, 46341, 5},
    {5, -3, INT32_MIN, 1, INT32_MAX, 65535, -2, -1, 7, 0, 1000, 123, -77, 3,
     46341, -1000},
};
static const int64_t IAR_IN[2][N] = {
    {0, 1, -1, 7, -7, 123456, -123456, 46340, -46340, 2, 3, 1000, -1000, 65535,
     5, 100},
    {3, -3, 0, 5, 100, -100, 7, 46340, 46340, -2, 1, -1000, 1000, 32767, -5,
     21},
};
static const int64_t IDIV_IN[2][N] = {
    {0, 1, -1, 7, -7, 123456, -123456, INT32_MAX, INT32_MIN, 2, 3, 1000, -1000,
     65536, 46341, 5},
    {3, -3, 1, 5, 7, -7, 2, -2, 10, 100, -100, 9, 11, -1, 13, 4},
};
static const int64_t IPOW_IN[2][N] = {
    {2, 3, -2, -3, 0, 1, -1, 10, 7, 2, 5, -1, 1, 0, 2, 3},
    {0, 1, 2, 5, 10, 0, 3, 31, 9, 32, 13, -2, -5, -1, -1, 20},
};
static const int64_t L_IN[2][N] = {
    {0, 1, -1, 1LL << 40, -(1LL << 40), INT64_MAX, INT64_MIN, 123456789012LL,
     -987654321LL, 2, 3, 1000, -1000, 1LL << 32, 3037000499LL, 5},
    {5, -3, INT64_MIN, 1, INT64_MAX, 65535, -2, -1, 7, 0, 1LL << 33, 123, -77,
     3, 3037000499LL, -1000},
};
static const int64_t LAR_IN[2][N] = {
    {0, 1, -1, 7, -7, 123456789012LL, -123456789012LL, 3037000499LL,
     -3037000499LL, 2, 3, 1000, -1000, 1LL << 40, 5, 100},
    {3, -3, 0, 5, 100, -1000, 7, 3037000499LL, 3037000499LL, -2, 1, -1000, 1000,
     1LL << 20, -5, 21},
};
static const int64_t LDIV_IN[2][N] = {
    {0, 1, -1, 7, -7, 123456789012LL, -123456789012LL, INT64_MAX, INT64_MIN, 2,
     3, 1000, -1000, 1LL << 40, 46341, 5},
    {3, -3, 1, 5, 7, -7, 2, -2, 10, 100, -100, 9, 11, -1, 13, 4},
};
static const double D2F_IN[N] = {
    0.1,       1e300,      -1e-300,    1.0 / 3.0, NAN,
    -INFINITY, 16777217.0, -0.0,       2e-38,     3.4028235677973366e38,
    -2.5,      1e10,       123.456789, 0.5,       1e-20,
    65504.0};

/* Input @p k of element @p i in domain @p dom. */
static double in_f(int dom, int k, int i)
{
  if (dom == D_FINT)
    return FINT_IN[i];
  if (dom == D_D2F)
    return D2F_IN[i];
  return F_IN[k][i];
}

static int64_t in_i(int dom, int k, int i)
{
  switch (dom) {
  case D_IAR:
    return IAR_IN[k][i];
  case D_IDIV:
    return IDIV_IN[k][i];
  case D_ISH:
    return k == 0 ? I_IN[0][i] : (i * 7) % 32;
  case D_IABS:
    return I_IN[0][i] == INT32_MIN ? INT32_MIN + 1 : I_IN[0][i];
  case D_IPOW:
    return IPOW_IN[k][i];
  case D_L:
    return L_IN[k][i];
  case D_LAR:
    return LAR_IN[k][i];
  case D_LDIV:
    return LDIV_IN[k][i];
  case D_LSH:
    return k == 0 ? L_IN[0][i] : (i * 13) % 64;
  case D_LABS:
    return L_IN[0][i] == INT64_MIN ? INT64_MIN + 1 : L_IN[0][i];
  case D_FINT:
    return (int64_t)FINT_IN[i];
  default:
    return I_IN[k][i];
  }
}

/* ------------------------------------------------------------ references */

typedef double (*d1_t)(double);
typedef double (*d2_t)(double, double);
typedef double (*d3_t)(double, double, double);
typedef long double (*q1_t)(long double);
typedef long double (*q2_t)(long double, long double);
typedef float (*f1_t)(float);
typedef float (*f2_t)(float, float);
typedef float (*f3_t)(float, float, float);
typedef int64_t (*i1_t)(int64_t);
typedef int64_t (*i2_t)(int64_t, int64_t);

static double r_rsqrt(double x)
{
  return 1.0 / sqrt(x);
}
static long double r_rsqrtl(long double x)
{
  return 1.0L / sqrtl(x);
}
static double r_id(double x)
{
  return x;
}
static float r_addf(float a, float b)
{
  return a + b;
}
static float r_subf(float a, float b)
{
  return a - b;
}
static float r_mulf(float a, float b)
{
  return a * b;
}
static float r_divf(float a, float b)
{
  return a / b;
}
static double r_add(double a, double b)
{
  return a + b;
}
static double r_sub(double a, double b)
{
  return a - b;
}
static double r_mul(double a, double b)
{
  return a * b;
}
static double r_div(double a, double b)
{
  return a / b;
}

/* Integer references on int64_t, wrapped to the result type by the
 * caller; shifts and negation through unsigned, as the hardware does. */
static int64_t r_iadd(int64_t a, int64_t b)
{
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t r_isub(int64_t a, int64_t b)
{
  return (int64_t)((uint64_t)a - (uint64_t)b);
}
static int64_t r_imul(int64_t a, int64_t b)
{
  return (int64_t)((uint64_t)a * (uint64_t)b);
}
static int64_t r_idiv(int64_t a, int64_t b)
{
  return a / b;
}
static int64_t r_imod(int64_t a, int64_t b)
{
  return a % b;
}
static int64_t r_and(int64_t a, int64_t b)
{
  return a & b;
}
static int64_t r_or(int64_t a, int64_t b)
{
  return a | b;
}
static int64_t r_xor(int64_t a, int64_t b)
{
  return a ^ b;
}
static int64_t r_not(int64_t a)
{
  return ~a;
}
static int64_t r_neg(int64_t a)
{
  return (int64_t)(0 - (uint64_t)a);
}
static int64_t r_abs(int64_t a)
{
  return a < 0 ? -a : a;
}
static int64_t r_min(int64_t a, int64_t b)
{
  return a < b ? a : b;
}
static int64_t r_max(int64_t a, int64_t b)
{
  return a > b ? a : b;
}
static int64_t r_shl32(int64_t a, int64_t b)
{
  return (int32_t)((uint32_t)a << b);
}
static int64_t r_shr32(int64_t a, int64_t b)
{
  return (int32_t)a >> b;
}
static int64_t r_lsr32(int64_t a, int64_t b)
{
  return (int32_t)((uint32_t)a >> b);
}
static int64_t r_shl64(int64_t a, int64_t b)
{
  return (int64_t)((uint64_t)a << b);
}
static int64_t r_shr64(int64_t a, int64_t b)
{
  return a >> b;
}
static int64_t r_lsr64(int64_t a, int64_t b)
{
  return (int64_t)((uint64_t)a >> b);
}
/* b multiplications, wrapping (Gpu.ml's host spoc_powint); b < 0: what
 * 1 / a ** -b truncates to */
static int64_t r_powint(int64_t a, int64_t b)
{
  uint32_t r = 1;

  if (b < 0)
    return a == 1 ? 1 : a == -1 ? (b % 2 != 0 ? -1 : 1) : 0;
  for (int64_t e = 0; e < b; e++)
    r *= (uint32_t)a;
  return (int32_t)r;
}

/* One intrinsic applied to N inputs. Argument types: 'f' f32, 'd' f64,
 * 'i' i32, 'l' i64; ulp: the bound for a float result (0: bit for bit). */
typedef struct {
  const char *path, *name, *args;
  char ret;
  int ulp, dom;
  f1_t f1;
  f2_t f2;
  f3_t f3;
  d1_t d1;
  d2_t d2;
  d3_t d3;
  q1_t q1;
  q2_t q2;
  i1_t i1;
  i2_t i2;
} case_t;

#define P32 "[\"Float32\"]"
#define P64 "[\"Float64\"]"
#define M32 "[\"Sarek_stdlib\", \"Math\", \"Float32\"]"
#define PI32 "[\"Int32\"]"
#define PI64 "[\"Int64\"]"
#define PGPU "[\"Gpu\"]"
/* Float32 within @p u ULPs of the double function rounded; exact by the
 * float function; Float64 within @p u of the long double function */
#define F1(n, u, fn) {P32, n, "f", 'f', u, D_F, .d1 = fn},
#define F2(n, u, fn) {P32, n, "ff", 'f', u, D_F, .d2 = fn},
#define FX1(n, fn) {P32, n, "f", 'f', 0, D_F, .f1 = fn},
#define FX2(n, fn) {P32, n, "ff", 'f', 0, D_F, .f2 = fn},
#define D1(n, u, fn) {P64, n, "d", 'd', u, D_F, .q1 = fn},
#define D2(n, u, fn) {P64, n, "dd", 'd', u, D_F, .q2 = fn},
#define DX1(n, fn) {P64, n, "d", 'd', 0, D_F, .d1 = fn},
#define DX2(n, fn) {P64, n, "dd", 'd', 0, D_F, .d2 = fn},
#define I2(p, n, dom, fn) {p, n, "ii", 'i', 0, dom, .i2 = fn},
#define I1(p, n, dom, fn) {p, n, "i", 'i', 0, dom, .i1 = fn},
#define L2(p, n, dom, fn) {p, n, "ll", 'l', 0, dom, .i2 = fn},
#define L1(p, n, dom, fn) {p, n, "l", 'l', 0, dom, .i1 = fn},

static const case_t cases[] = {
    /* Float32: the bounds of IR.md */
    F1("sin", 3, sin) F1("cos", 3, cos) F1("tan", 5, tan) F1("asin", 3, asin)
        F1("acos", 3, acos) F1("atan", 3, atan) F1("sinh", 4, sinh) F1(
            "cosh", 3, cosh) F1("tanh", 3, tanh) F1("exp", 3, exp)
            F1("exp2", 3, exp2) F1("expm1", 2, expm1) F1("log", 2, log) F1(
                "log2", 2, log2) F1("log10", 3, log10) F1("log1p", 2, log1p)
                F1("rsqrt", 3, r_rsqrt) F1("cbrt", 2, cbrt) F2("pow", 5, pow)
                    F2("atan2", 4, atan2) F2("hypot", 4, hypot) FX1(
                        "sqrt", sqrtf) FX1("floor", floorf) FX1("ceil", ceilf)
                        FX1("round", roundf) FX1("trunc", truncf)
                            FX1("fabs", fabsf) FX1("abs_float", fabsf) FX2(
                                "copysign", copysignf) FX2("fmod", fmodf)
                                FX2("min", fminf) FX2("max", fmaxf){
                                    P32, "fma", "fff", 'f', 0, D_F, .f3 = fmaf},
    {M32, "sin", "f", 'f', 3, D_F, .d1 = sin},
    {M32, "min", "ff", 'f', 0, D_F, .f2 = fminf},
    {P32, "add_float32", "ff", 'f', 0, D_F, .f2 = r_addf},
    {P32, "sub_float32", "ff", 'f', 0, D_F, .f2 = r_subf},
    {P32, "mul_float32", "ff", 'f', 0, D_F, .f2 = r_mulf},
    {P32, "div_float32", "ff", 'f', 0, D_F, .f2 = r_divf},
    {P32, "add", "ff", 'f', 0, D_F, .f2 = r_addf},
    {P32, "minus", "ff", 'f', 0, D_F, .f2 = r_subf},
    {P32, "mul", "ff", 'f', 0, D_F, .f2 = r_mulf},
    {P32, "div", "ff", 'f', 0, D_F, .f2 = r_divf},
    {P32, "of_int", "i", 'f', 0, D_I, .d1 = r_id},
    {P32, "to_int", "f", 'i', 0, D_FINT, .d1 = trunc},
    /* Float64 */
    D1("sin", 3, sinl) D1("cos", 3, cosl) D1("tan", 3, tanl)
        D1("asin", 3, asinl) D1("acos", 3, acosl) D1("atan", 3, atanl)
            D1("sinh", 3, sinhl) D1("cosh", 2, coshl) D1("tanh", 2, tanhl) D1(
                "exp", 2, expl) D1("exp2", 2, exp2l) D1("expm1", 2, expm1l)
                D1("log", 2, logl) D1("log2", 2, log2l) D1("log10", 2, log10l)
                    D1("log1p", 2, log1pl) D1("rsqrt", 2, r_rsqrtl)
                        D1("cbrt", 2, cbrtl) D2("pow", 3, powl)
                            D2("atan2", 3, atan2l) D2("hypot", 3, hypotl)
                                DX1("sqrt", sqrt) DX1("floor", floor)
                                    DX1("ceil", ceil) DX1("round", round) DX1(
                                        "trunc", trunc) DX1("fabs", fabs)
                                        DX1("abs_float", fabs) DX2("copysign",
                                                                   copysign)
                                            DX2("fmod", fmod) DX2("min", fmin)
                                                DX2("max", fmax){
                                                    P64, "fma", "ddd", 'd', 0,
                                                    D_F, .d3 = fma},
    {"[\"Math\", \"Float64\"]", "cos", "d", 'd', 3, D_F, .q1 = cosl},
    {"[\"Sarek_float64\", \"Float64\"]", "expm1", "d", 'd', 2, D_F,
     .q1 = expm1l},
    {P64, "add_float64", "dd", 'd', 0, D_F, .d2 = r_add},
    {P64, "sub_float64", "dd", 'd', 0, D_F, .d2 = r_sub},
    {P64, "mul_float64", "dd", 'd', 0, D_F, .d2 = r_mul},
    {P64, "div_float64", "dd", 'd', 0, D_F, .d2 = r_div},
    {P64, "of_int", "i", 'd', 0, D_I, .d1 = r_id},
    {P64, "of_int32", "i", 'd', 0, D_I, .d1 = r_id},
    {P64, "to_int", "d", 'i', 0, D_FINT, .d1 = trunc},
    {P64, "to_int32", "d", 'i', 0, D_FINT, .d1 = trunc},
    {P64, "of_float32", "f", 'd', 0, D_F, .d1 = r_id},
    {P64, "to_float32", "d", 'f', 0, D_D2F, .d1 = r_id},
    /* Int32 */
    I2(PI32, "add_int32", D_IAR, r_iadd) I2(PI32, "sub_int32", D_IAR, r_isub)
        I2(PI32, "mul_int32", D_IAR, r_imul) I2(PI32, "div_int32", D_IDIV,
                                                r_idiv)
            I2(PI32, "mod_int32", D_IDIV, r_imod) I2(PI32, "logand", D_I, r_and)
                I2(PI32, "logor", D_I, r_or) I2(PI32, "logxor", D_I, r_xor)
                    I1(PI32, "lognot", D_I, r_not) I2(PI32, "shift_left", D_ISH,
                                                      r_shl32)
                        I2(PI32, "shift_right", D_ISH, r_shr32)
                            I2(PI32, "shift_right_logical", D_ISH, r_lsr32)
                                I1(PI32, "neg", D_IABS, r_neg) I1(PI32, "abs",
                                                                  D_IABS, r_abs)
                                    I2(PI32, "min", D_I, r_min)
                                        I2(PI32, "max", D_I, r_max)
                                            I2("[\"Math\"]", "xor", D_I, r_xor)
                                                I2("[\"Math\"]", "logical_and",
                                                   D_I, r_and)
    /* Int64 */
    L2(PI64, "add_int64", D_LAR, r_iadd) L2(PI64, "sub_int64", D_LAR, r_isub)
        L2(PI64, "mul_int64", D_LAR, r_imul) L2(PI64, "div_int64", D_LDIV,
                                                r_idiv)
            L2(PI64, "mod_int64", D_LDIV, r_imod) L2(PI64, "logand", D_L, r_and)
                L2(PI64, "logor", D_L, r_or) L2(PI64, "logxor", D_L, r_xor)
                    L1(PI64, "lognot", D_L, r_not)
                        L2(PI64, "shift_left", D_LSH, r_shl64)
                            L2(PI64, "shift_right", D_LSH, r_shr64)
                                L2(PI64, "shift_right_logical", D_LSH, r_lsr64)
                                    L1(PI64, "neg", D_LABS, r_neg)
                                        L1(PI64, "abs", D_LABS, r_abs)
                                            L2(PI64, "min", D_L, r_min)
                                                L2(PI64, "max", D_L, r_max)
    /* by name, whatever the path */
    {"[]", "float", "i", 'f', 0, D_I, .d1 = r_id},
    {PGPU, "float_of_int", "i", 'f', 0, D_I, .d1 = r_id},
    {PGPU, "float64_of_int", "i", 'd', 0, D_I, .d1 = r_id},
    {"[]", "int_of_float", "f", 'i', 0, D_FINT, .d1 = trunc},
    {PGPU, "int_of_float64", "d", 'i', 0, D_FINT, .d1 = trunc},
    {PGPU, "spoc_powint", "ii", 'i', 0, D_IPOW, .i2 = r_powint},
    {"[\"Std\"]", "spoc_powint", "ii", 'i', 0, D_IPOW, .i2 = r_powint},
    {"[]", "abs_float", "f", 'f', 0, D_F, .f1 = fabsf},
    {"[]", "abs_float", "d", 'd', 0, D_F, .d1 = fabs},
    {"[]", "expm1", "f", 'f', 2, D_F, .d1 = expm1},
    {"[]", "expm1", "d", 'd', 2, D_F, .q1 = expm1l},
    {"[]", "log1p", "f", 'f', 2, D_F, .d1 = log1p},
    {"[]", "log1p", "d", 'd', 2, D_F, .q1 = log1pl},
    {"[]", "hypot", "ff", 'f', 4, D_F, .d2 = hypot},
    {"[]", "hypot", "dd", 'd', 3, D_F, .q2 = hypotl},
    {"[]", "copysign", "ff", 'f', 0, D_F, .f2 = copysignf},
    {"[]", "copysign", "dd", 'd', 0, D_F, .d2 = copysign},
    {"[]", "fmod", "ff", 'f', 0, D_F, .f2 = fmodf},
    {"[]", "fmod", "dd", 'd', 0, D_F, .d2 = fmod},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* The reference of case @p c for element @p i: a double for float
 * results (exactly the float or double wanted), an int64_t for integers. */
static void reference(const case_t *c, int i, double *rf, int64_t *ri)
{
  double a[3] = {0, 0, 0};
  int64_t b[3] = {0, 0, 0};
  size_t na = strlen(c->args);

  for (size_t k = 0; k < na; k++) {
    switch (c->args[k]) {
    case 'f':
      a[k] = (float)in_f(c->dom, (int)k, i);
      break;
    case 'd':
      a[k] = in_f(c->dom, (int)k, i);
      break;
    default:
      b[k] = in_i(c->dom, (int)k, i);
      a[k] = (double)b[k];
      if (c->args[k] == 'i')
        b[k] = (int32_t)b[k];
      break;
    }
  }
  *rf = 0;
  *ri = 0;
  if (c->i1 != NULL || c->i2 != NULL) {
    *ri = c->i1 ? c->i1(b[0]) : c->i2(b[0], b[1]);
    if (c->ret == 'i')
      *ri = (int32_t)*ri;
    return;
  }
  if (c->f1)
    *rf = c->f1((float)a[0]);
  else if (c->f2)
    *rf = c->f2((float)a[0], (float)a[1]);
  else if (c->f3)
    *rf = c->f3((float)a[0], (float)a[1], (float)a[2]);
  else if (c->d1)
    *rf = c->d1(a[0]);
  else if (c->d2)
    *rf = c->d2(a[0], a[1]);
  else if (c->d3)
    *rf = c->d3(a[0], a[1], a[2]);
  else if (c->q1)
    *rf = (double)c->q1((long double)a[0]);
  else if (c->q2)
    *rf = (double)c->q2((long double)a[0], (long double)a[1]);
  if (c->ret == 'f')
    *rf = (float)*rf;
  else if (c->ret == 'i')
    *ri = (int32_t)*rf;
}

/* ULPs between two floats (or doubles) of the same sign convention: +0
 * and -0 are 0 apart. */
static uint64_t ulps(double x, double y, int dbl)
{
  int64_t a, b;

  if (dbl) {
    memcpy(&a, &x, 8);
    memcpy(&b, &y, 8);
    if (a < 0)
      a = INT64_MIN - a;
    if (b < 0)
      b = INT64_MIN - b;
  } else {
    float fx = (float)x, fy = (float)y;
    int32_t u, v;
    memcpy(&u, &fx, 4);
    memcpy(&v, &fy, 4);
    a = u < 0 ? (int64_t)INT32_MIN - u : u;
    b = v < 0 ? (int64_t)INT32_MIN - v : v;
  }
  return a > b ? (uint64_t)(a - b) : (uint64_t)(b - a);
}

/* Whether @p got is within the case's bound of @p want. */
static int float_ok(const case_t *c, double got, double want)
{
  if (isnan(want) || isnan(got))
    return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got))
    return got == want;
  if (c->ulp == 0) /* bit for bit: the sign of a zero counts */
    return got == want && signbit(got) == signbit(want);
  return ulps(got, want, c->ret == 'd') <= (uint64_t)c->ulp;
}

/* -------------------------------------------------------------- the kernel */

/* Parameter ids: the input arrays by type and argument, the outputs by
 * type, the atomics' counters and old values, n. */
enum {
  P_F0 = 0, /* f32 args 0..2 */
  P_D0 = 3, /* f64 args 0..2 */
  P_I0 = 6, /* i32 args 0..1 */
  P_L0 = 8, /* i64 args 0..1 */
  P_OF = 10,
  P_OD,
  P_OI,
  P_OL,
  P_CNT,
  P_OLD,
  P_N,
  V_I,
  NPARAMS = P_N + 1
};

static const char *const pnames[] = {"fa0", "fa1", "fa2", "da0",  "da1", "da2",
                                     "ia0", "ia1", "la0", "la1",  "of",  "od",
                                     "oi",  "ol",  "cnt", "olds", "n"};

static const char *elt_type(char t)
{
  return t == 'f' ? "f32" : t == 'd' ? "f64" : t == 'i' ? "i32" : "i64";
}

static int arg_param(char t, int k)
{
  return t == 'f'   ? P_F0 + k
         : t == 'd' ? P_D0 + k
         : t == 'i' ? P_I0 + k
                    : P_L0 + k;
}

static int out_param(char t)
{
  return t == 'f' ? P_OF : t == 'd' ? P_OD : t == 'i' ? P_OI : P_OL;
}

/* The IR document (JSON) of the kernel that runs cases [0, @p n). */
static char *kernel_json(size_t n)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  static const char elts[] = "fffdddiillfdilii";

  ck_assert_ptr_nonnull(f);
  fprintf(f, "{\"ir\": 1, \"kernel\": {\"name\": \"stdintr\", \"params\": [");
  for (int p = 0; p < NPARAMS; p++)
    fprintf(f,
            "%s[\"param\", {\"name\": \"%s\", \"id\": %d, \"type\": %s%s%s]"
            "}, null]",
            p ? ", " : "", pnames[p], p, p == P_N ? "[\"" : "[\"vec\", [\"",
            p == P_N ? "i32" : elt_type(elts[p]), p == P_N ? "\"" : "\"]");
  fprintf(f,
          "], \"body\": [\"let\", {\"name\": \"i\", \"id\": %d, \"type\": "
          "[\"i32\"]}, [\"intrinsic\", [\"Gpu\"], \"global_thread_id\", "
          "[]], [\"if\", [\"binop\", \"lt\", [\"var\", %d, \"i\"], "
          "[\"var\", %d, \"n\"]], [\"seq\", [",
          V_I, V_I, P_N);
  for (size_t j = 0; j < n; j++) {
    const case_t *c = &cases[j];
    char idx[200];
    snprintf(idx, sizeof(idx),
             "[\"binop\", \"add\", [\"const\", [\"i32\", %zu]], [\"var\", %d, "
             "\"i\"]]",
             j * N, V_I);
    fprintf(f,
            "%s[\"assign\", [\"aelem\", \"%s\", %s], [\"intrinsic\", %s, "
            "\"%s\", [",
            j ? ", " : "", pnames[out_param(c->ret)], idx, c->path, c->name);
    for (size_t k = 0; c->args[k] != '\0'; k++)
      fprintf(f, "%s[\"aread\", \"%s\", %s]", k ? ", " : "",
              pnames[arg_param(c->args[k], (int)k)], idx);
    fprintf(f, "]]]");
  }
  /* the atomics: olds[i] and olds[N + i] are the old values of
   * cnt[i % 4] and cnt[4 + i % 2] */
  fprintf(f,
          ", [\"assign\", [\"aelem\", \"olds\", [\"var\", %d, \"i\"]], "
          "[\"intrinsic\", [], \"atomic_inc_int32\", [[\"var\", %d, \"cnt\"], "
          "[\"binop\", \"mod\", [\"var\", %d, \"i\"], [\"const\", [\"i32\", "
          "4]]]]]], [\"assign\", [\"aelem\", \"olds\", [\"binop\", \"add\", "
          "[\"const\", [\"i32\", %d]], [\"var\", %d, \"i\"]]], [\"intrinsic\", "
          "[\"Gpu\"], \"atomic_inc_global_int32\", [[\"var\", %d, \"cnt\"], "
          "[\"binop\", \"add\", [\"const\", [\"i32\", 4]], [\"binop\", "
          "\"mod\", [\"var\", %d, \"i\"], [\"const\", [\"i32\", 2]]]]]]]",
          V_I, P_CNT, V_I, N, V_I, P_CNT, V_I);
  fprintf(f, "]], null]]}}");
  ck_assert_int_eq(fclose(f), 0);
  return text;
}

static void to_msgpack(const char *json, msgpack_sbuffer *mp)
{
  char err[300];

  msgpack_sbuffer_init(mp);
  ck_assert_msg(ir_json_to_msgpack(json, strlen(json), mp, err, sizeof(err)) ==
                    0,
                "%s", err);
}

static hipd_buffer_t upload(hipd_conn_t *conn, int dev, const void *data,
                            size_t bytes)
{
  hipd_buffer_t b = HIPD_BUFFER_NULL;

  OK(conn, hipd_mem_alloc(conn, dev, bytes, "byte", &b));
  if (data != NULL)
    OK(conn, hipd_mem_write(conn, b, 0, data, bytes));
  else
    OK(conn, hipd_mem_memset(conn, b, 0, bytes, 0));
  return b;
}

/* Every case on device @p dev. @return the number of wrong results
 * (each printed). */
static int run_cases(hipd_conn_t *conn, int dev, const msgpack_sbuffer *ir)
{
  enum { M = NCASES * N };
  static float fa[3][M], of[M];
  static double da[3][M], od[M];
  static int32_t ia[2][M], oi[M], cnt[8], olds[2 * N];
  static int64_t la[2][M], ol[M];
  void *host[NPARAMS] = {fa[0], fa[1], fa[2], da[0], da[1], da[2], ia[0], ia[1],
                         la[0], la[1], of,    od,    oi,    ol,    cnt,   olds};
  const size_t esz[NPARAMS] = {4, 4, 4, 8, 8, 8, 4, 4, 8, 8, 4, 8, 4, 8, 4, 4};
  const size_t count[NPARAMS] = {M, M, M, M, M, M, M, M,
                                 M, M, M, M, M, M, 8, 2 * N};
  hipd_buffer_t buf[NPARAMS];
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  hipd_info_t *info = NULL;
  hipd_args_t *args = args_new();
  uint32_t grid[3] = {1, 1, 1}, block[3] = {N, 1, 1};
  int bad = 0, seen[2][N];

  memset(of, 0, sizeof(of));
  memset(od, 0, sizeof(od));
  memset(oi, 0, sizeof(oi));
  memset(ol, 0, sizeof(ol));
  memset(cnt, 0, sizeof(cnt));
  for (size_t j = 0; j < NCASES; j++)
    for (int i = 0; i < N; i++)
      for (int kk = 0; kk < 3; kk++) {
        size_t at = j * N + (size_t)i;
        fa[kk][at] = (float)in_f(cases[j].dom, kk, i);
        da[kk][at] = in_f(cases[j].dom, kk, i);
        if (kk < 2) {
          ia[kk][at] = (int32_t)in_i(cases[j].dom, kk, i);
          la[kk][at] = in_i(cases[j].dom, kk, i);
        }
      }
  OK(conn, hipd_kernel_compile_ir(conn, dev, ir->data, ir->size, NULL, NULL,
                                  NULL, &k, &info));
  hipd_info_free(info);
  for (int p = 0; p < P_N; p++) {
    buf[p] = upload(conn, dev, p >= P_OF && p < P_CNT ? NULL : host[p],
                    esz[p] * count[p]);
    hipd_args_buffer(args, buf[p], 0);
    hipd_args_i32(args, (int32_t)count[p]);
  }
  hipd_args_i32(args, N);
  OK(conn, hipd_kernel_launch(conn, k, grid, block, 0, HIPD_STREAM_NULL, args));
  for (int p = P_OF; p < P_N; p++)
    OK(conn, hipd_mem_read(conn, buf[p], 0, host[p], esz[p] * count[p]));
  for (int p = 0; p < P_N; p++)
    OK(conn, hipd_mem_free(conn, buf[p]));
  hipd_args_free(args);
  OK(conn, hipd_kernel_destroy(conn, k));

  for (size_t j = 0; j < NCASES; j++) {
    const case_t *c = &cases[j];
    for (int i = 0; i < N; i++) {
      size_t at = j * N + (size_t)i;
      double rf, got = 0;
      int64_t ri, goti = 0;
      int ok;
      reference(c, i, &rf, &ri);
      switch (c->ret) {
      case 'f':
        got = of[at];
        ok = float_ok(c, got, rf);
        break;
      case 'd':
        got = od[at];
        ok = float_ok(c, got, rf);
        break;
      case 'i':
        goti = oi[at];
        ok = goti == ri;
        break;
      default:
        goti = ol[at];
        ok = goti == ri;
        break;
      }
      if (ok)
        continue;
      bad++;
      if (c->ret == 'f' || c->ret == 'd')
        fprintf(stderr,
                "device %d: %s %s [%d] (%.17g, %.17g, %.17g): got %.17g "
                "(%a), want %.17g (%a), %llu ulps, bound %d\n",
                dev, c->path, c->name, i, in_f(c->dom, 0, i),
                in_f(c->dom, 1, i), in_f(c->dom, 2, i), got, got, rf, rf,
                (unsigned long long)ulps(got, rf, c->ret == 'd'), c->ulp);
      else
        fprintf(stderr,
                "device %d: %s %s [%d] (%lld, %lld): got %lld, want %lld\n",
                dev, c->path, c->name, i, (long long)in_i(c->dom, 0, i),
                (long long)in_i(c->dom, 1, i), (long long)goti, (long long)ri);
    }
  }
  /* atomics: each counter counted its threads, and handed each an old
   * value of its own */
  memset(seen, 0, sizeof(seen));
  for (int i = 0; i < N; i++) {
    int a = olds[i], b = olds[N + i];
    if (a >= 0 && a < N / 4)
      seen[0][(i % 4) * (N / 4) + a]++;
    if (b >= 0 && b < N / 2)
      seen[1][(i % 2) * (N / 2) + b]++;
  }
  for (int s = 0; s < 4; s++)
    if (cnt[s] != N / 4) {
      fprintf(stderr, "device %d: atomic_inc_int32: cnt[%d] = %d, want %d\n",
              dev, s, cnt[s], N / 4);
      bad++;
    }
  for (int s = 4; s < 6; s++)
    if (cnt[s] != N / 2) {
      fprintf(stderr,
              "device %d: atomic_inc_global_int32: cnt[%d] = %d, want %d\n",
              dev, s, cnt[s], N / 2);
      bad++;
    }
  for (int i = 0; i < N; i++)
    for (int s = 0; s < 2; s++)
      if (seen[s][i] != 1) {
        fprintf(stderr, "device %d: atomic_inc: old values not distinct\n",
                dev);
        bad++;
        s = 2;
        i = N;
      }
  return bad;
}

/* Every standard intrinsic against C, on every device. */
START_TEST(test_against_c)
{
  hipd_conn_t *conn = connect_to(shared);
  int n = device_count(conn), bad = 0;
  char *json = kernel_json(NCASES);
  msgpack_sbuffer ir;

  to_msgpack(json, &ir);
  for (int dev = 0; dev < n; dev++) {
    int b = run_cases(conn, dev, &ir);
    printf("check_stdintr: device %d: %zu intrinsics x %d inputs, %d wrong\n",
           dev, NCASES, N, b);
    bad += b;
  }
  ck_assert_msg(bad == 0, "%d results out of bounds (see above)", bad);
  msgpack_sbuffer_destroy(&ir);
  free(json);
  hipd_close(conn);
}
END_TEST

/* ---------------------------------------------------------- the source */

static char *source_of(hipd_conn_t *conn, const char *arch, const char *json)
{
  msgpack_sbuffer ir;
  hipd_info_t *info = NULL;
  const char *src;
  size_t slen;
  char *out;
  const int dev = 0; /* for OK's message */

  to_msgpack(json, &ir);
  OK(conn, hipd_kernel_generate_source(conn, 0, arch, ir.data, ir.size, NULL,
                                       NULL, &info));
  ck_assert_int_eq(hipd_info_str(info, "source", &src, &slen), 0);
  out = strndup(src, slen);
  hipd_info_free(info);
  msgpack_sbuffer_destroy(&ir);
  return out;
}

static int count_of(const char *hay, const char *needle)
{
  int n = 0;

  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

/* One call of path.name(x) in a kernel with an f32 vec x and an i32 vec y,
 * stored in x[0] (f) or y[0] (i), @p twice times. */
static char *one_call(const char *path, const char *name, const char *args,
                      char ret, int twice)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);

  fprintf(f, "{\"ir\": 1, \"kernel\": {\"name\": \"one\", \"params\": ["
             "[\"param\", {\"name\": \"x\", \"id\": 0, \"type\": [\"vec\", "
             "[\"f32\"]]}, null], [\"param\", {\"name\": \"y\", \"id\": 1, "
             "\"type\": [\"vec\", [\"i32\"]]}, null], [\"param\", {\"name\": "
             "\"sinf\", \"id\": 2, \"type\": [\"i32\"]}, null]], \"body\": "
             "[\"seq\", [");
  for (int t = 0; t < (twice ? 2 : 1); t++) {
    fprintf(f,
            "%s[\"assign\", [\"aelem\", \"%s\", [\"const\", [\"i32\", 0]]], "
            "[\"intrinsic\", %s, \"%s\", [",
            t ? ", " : "", ret == 'f' ? "x" : "y", path, name);
    for (size_t k = 0; args[k] != '\0'; k++)
      fprintf(f, "%s[\"aread\", \"%s\", [\"const\", [\"i32\", %zu]]]",
              k ? ", " : "", args[k] == 'f' ? "x" : "y", k);
    fprintf(f, "]]]");
  }
  fprintf(f, "]]}}");
  ck_assert_int_eq(fclose(f), 0);
  return text;
}

/* The generated source: the upstream spellings, helpers defined once and
 * only where used, the called names reserved. */
START_TEST(test_source)
{
  hipd_conn_t *conn = connect_to(shared);
  static const struct {
    const char *path, *name, *args;
    char ret;
    const char *want;
  } spell[] = {
      {P32, "sin", "f", 'f', "x[0] = sinf(x[0]);"},
      {"[\"Sarek_stdlib_meta\", \"Float32\"]", "max", "ff", 'f',
       "x[0] = fmaxf(x[0], x[1]);"},
      {"[\"Math\", \"Float32\"]", "abs_float", "f", 'f', "fabsf(x[0])"},
      {P64, "sin", "f", 'f', "x[0] = sin(x[0]);"},
      {"[]", "sin", "f", 'f', "x[0] = sin(x[0]);"},
      {"[\"Math\"]", "pow", "ff", 'f', "x[0] = pow(x[0], x[1]);"},
      {P32, "of_int", "i", 'f', "x[0] = ((float)(y[0]));"},
      {"[]", "float", "i", 'f', "x[0] = (float)(y[0]);"},
      {PI32, "mod_int32", "ii", 'i', "y[0] = ((y[0]) % (y[1]));"},
      {PI32, "shift_right_logical", "ii", 'i',
       "y[0] = ((int)((unsigned int)(y[0]) >> (y[1])));"},
      {"[\"Sarek_stdlib\", \"Gpu\"]", "atomic_inc_int32", "ii", 'i',
       "atomicAdd(&y[y[1]], 1)"},
  };
  char *json, *src;

  for (size_t i = 0; i < sizeof(spell) / sizeof(spell[0]); i++) {
    json =
        one_call(spell[i].path, spell[i].name, spell[i].args, spell[i].ret, 0);
    if (strcmp(spell[i].name, "atomic_inc_int32") == 0) {
      /* its first argument is the array itself */
      static const char from[] =
          "[\"aread\", \"y\", [\"const\", [\"i32\", 0]]]";
      static const char to[] = "[\"var\", 1, \"y\"]";
      char *p = strstr(json, from);
      ck_assert_ptr_nonnull(p);
      memcpy(p, to, strlen(to));
      memmove(p + strlen(to), p + strlen(from), strlen(p + strlen(from)) + 1);
    }
    src = source_of(conn, "gfx90a", json);
    ck_assert_msg(strstr(src, spell[i].want) != NULL, "%s.%s: want %s in\n%s",
                  spell[i].path, spell[i].name, spell[i].want, src);
    free(src);
    free(json);
  }
  /* a helper: once for two calls, defined before the kernel; the param
   * named sinf does not hide sinf */
  json = one_call("[\"Gpu\"]", "spoc_powint", "ii", 'i', 1);
  src = source_of(conn, "sm_90", json);
  ck_assert_int_eq(count_of(src, "__device__ int hipd_spoc_powint("), 1);
  ck_assert_int_eq(count_of(src, "hipd_spoc_powint(y[0], y[1])"), 2);
  ck_assert(strstr(src, "hipd_spoc_powint(") < strstr(src, "__global__"));
  free(src);
  free(json);
  json = one_call(P32, "sin", "f", 'f', 1);
  src = source_of(conn, "host-x86_64", json);
  ck_assert_ptr_null(strstr(src, "hipd_"));
  ck_assert_ptr_null(strstr(src, "int sinf"));
  free(src);
  free(json);
  json = one_call(PI64, "max", "ff", 'f', 0);
  src = source_of(conn, "gfx90a", json);
  ck_assert_int_eq(count_of(src, "long long hipd_max_i64("), 1);
  ck_assert_ptr_null(strstr(src, "hipd_min_i64"));
  free(src);
  free(json);
  hipd_close(conn);
}
END_TEST

/* intrinsics.list has them all with their convergence; .find resolves as
 * a call does; registrations shadow the standard library for their
 * session and never the core table. */
START_TEST(test_registry)
{
  hipd_conn_t *a = connect_to(shared), *b = connect_to(shared);
  hipd_info_t *info = NULL;
  const int dev = 0; /* for OK's message */
  char p[64];
  size_t n;
  int seen = 0;
  char *json, *src;

  OK(a, hipd_intrinsics_list(a, 0, "gfx90a", &info));
  n = hipd_info_len(info, "");
  for (size_t i = 0; i < n; i++) {
    const char *name, *conv;
    snprintf(p, sizeof(p), "%zu.name", i);
    name = info_str(info, p);
    snprintf(p, sizeof(p), "%zu.convergence", i);
    conv = info_str(info, p);
    for (size_t j = 0; j < NCASES; j++) {
      char full[128];
      const char *q = cases[j].path;
      if (strcmp(q, P32) == 0 || strcmp(q, P64) == 0 || strcmp(q, PI32) == 0 ||
          strcmp(q, PI64) == 0)
        snprintf(full, sizeof(full), "%.*s.%s", (int)strcspn(q + 2, "\""),
                 q + 2, cases[j].name);
      else
        continue;
      if (strcmp(full, name) == 0) {
        ck_assert_str_eq(conv, "uniform");
        seen++;
        break;
      }
    }
    if (strncmp(name, "atomic_inc_", 11) == 0) {
      ck_assert_str_eq(conv, "divergent");
      seen += 100;
    }
  }
  hipd_info_free(info);
  ck_assert_int_ge(seen, 200 + 110);

  OK(a,
     hipd_intrinsics_find(a, "Sarek_float64.Float64.log1p", 0, "sm_90", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "log1p(%s)");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Int64.min", 0, "gfx90a", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "hipd_min_i64(%s, %s)");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Whatever.spoc_powint", 0, "gfx90a", &info));
  ck_assert_int_eq(info_int(info, "0.arity"), 2);
  hipd_info_free(info);
  /* Float32's sqrt is sqrtf; a bare sqrt is the core one */
  OK(a, hipd_intrinsics_find(a, "Float32.sqrt", 0, "gfx90a", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "sqrtf(%s)");
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Gpu.sqrt", 0, "gfx90a", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "sqrt(%s)");
  hipd_info_free(info);

  /* the core table stays unshadowable */
  EXPECT(
      a,
      hipd_intrinsics_register(a, "Float32.sin", "mysin", HIPD_CONV_UNIFORM, 1),
      HIPD_EEXIST);
  /* a full name shadows the qualified form for calls of that path only */
  OK(a, hipd_intrinsics_register(a, "Float32.expm1", "my_expm1",
                                 HIPD_CONV_DIVERGENT, 1));
  OK(a, hipd_intrinsics_find(a, "Float32.expm1", 0, "gfx90a", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "my_expm1");
  ck_assert(!info_bool(info, "0.builtin"));
  hipd_info_free(info);
  OK(a, hipd_intrinsics_find(a, "Math.Float32.expm1", 0, "gfx90a", &info));
  ck_assert_str_eq(info_str(info, "0.code"), "expm1f(%s)");
  hipd_info_free(info);
  /* a bare name shadows the by-name form, whatever the path */
  OK(a, hipd_intrinsics_register(a, "float", "(double)", HIPD_CONV_UNIFORM, 1));
  json = one_call(PGPU, "float", "i", 'f', 0);
  src = source_of(a, "gfx90a", json);
  ck_assert_ptr_nonnull(strstr(src, "x[0] = ((double)(y[0]));"));
  free(src);
  /* session b still has the standard one */
  src = source_of(b, "gfx90a", json);
  ck_assert_ptr_nonnull(strstr(src, "x[0] = (float)(y[0]);"));
  free(src);
  free(json);
  json = one_call(P32, "expm1", "f", 'f', 0);
  src = source_of(a, "gfx90a", json);
  ck_assert_ptr_nonnull(strstr(src, "x[0] = (my_expm1(x[0]));"));
  free(src);
  src = source_of(b, "gfx90a", json);
  ck_assert_ptr_nonnull(strstr(src, "x[0] = expm1f(x[0]);"));
  free(src);
  free(json);
  /* a wrong arity names the qualified form */
  json = one_call(P32, "hypot", "f", 'f', 0);
  {
    msgpack_sbuffer ir;
    to_msgpack(json, &ir);
    EXPECT(b,
           hipd_kernel_generate_source(b, 0, "gfx90a", ir.data, ir.size, NULL,
                                       NULL, &info),
           HIPD_EINTRINSIC);
    ck_assert_ptr_nonnull(strstr(hipd_last_error(b),
                                 "intrinsic 'Float32.hypot' takes 2 args, "
                                 "got 1"));
    msgpack_sbuffer_destroy(&ir);
  }
  free(json);
  hipd_close(a);
  hipd_close(b);
}
END_TEST

/* hiprtc (or NVRTC) compiles the kernel of every standard intrinsic for
 * the HIP platform this hipd is built for: gfx90a when AMD (no AMD GPU is
 * needed), the GPU's architecture when NVIDIA. */
START_TEST(test_compile_for_gpu)
{
  hipd_conn_t *conn = connect_to(shared);
  hipd_info_t *info = NULL;
  char arch[64] = "", *json;
  msgpack_sbuffer ir;
  const int dev = 0; /* for OK's message */

  testutil_gpu_arch(conn, arch, sizeof(arch));
  if (arch[0] == '\0') {
    printf("check_stdintr: hipd has no HIP compiler for a GPU target here: "
           "the standard intrinsics were not compiled for a GPU\n");
    hipd_close(conn);
    return;
  }
  json = kernel_json(NCASES);
  to_msgpack(json, &ir);
  OK(conn, hipd_kernel_compile_ir_for(conn, arch, ir.data, ir.size, NULL, NULL,
                                      NULL, &info));
  ck_assert_msg(info_int(info, "bytes") > 0, "no code for %s", arch);
  hipd_info_free(info);
  printf("check_stdintr: %zu standard intrinsics compiled for %s\n", NCASES,
         arch);
  msgpack_sbuffer_destroy(&ir);
  free(json);
  hipd_close(conn);
}
END_TEST

/* ------------------------------------------------------------------ main */

static void shared_setup(void)
{
  shared = harness_start("--cpu-devices", "2", NULL);
  ck_assert_msg(shared != NULL, "hipd did not start");
}

static void shared_teardown(void)
{
  stop_checked(&shared);
}

static Suite *stdintr_suite(void)
{
  Suite *s = suite_create("stdintr");
  TCase *tc = tcase_create("stdintr");

  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, shared_setup, shared_teardown);
  tcase_add_test(tc, test_source);
  tcase_add_test(tc, test_registry);
  tcase_add_test(tc, test_against_c);
  tcase_add_test(tc, test_compile_for_gpu);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  int failed;

  harness_init("check_stdintr");
  failed = test_run(stdintr_suite());
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
