"""The C of Python's numbers: integer arithmetic in `int64_t` that records a fault where Python
would raise or leave 64 bits (`kdsl_add`, `kdsl_floordiv`, ...: flooring `//` and `%`, the
DSL's truncating `rt.trunc_div` / `rt.trunc_mod` / `rt.cdiv`), Python's float `//` and `%`,
exact int-float comparison, and kernel parameters packed as Python's `struct` packs them
(range checks, f32 overflow, f16 and bf16 rounded to nearest even).
"""

from __future__ import annotations

NUMBERS = r"""/* ----- arithmetic with Python's meaning: a fault where Python would raise or leave 64 bits ----- */
typedef struct kdsl_eval {
    const char *fault; /* the first fault, if any */
} kdsl_eval;
static KDSL_TLS char kdsl_detail_text[192]; /* what did not fit a kernel parameter */

#define KDSL_OVERFLOW "an integer in the launch arithmetic needs more than 64 bits"

KDSL_COLD static int64_t kdsl_fault(kdsl_eval *ev, const char *what)
{
    if (ev->fault == NULL)
        ev->fault = what;
    return 0;
}

static inline int64_t kdsl_add(kdsl_eval *ev, int64_t a, int64_t b)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return a + b;
}

static inline int64_t kdsl_sub(kdsl_eval *ev, int64_t a, int64_t b)
{
    if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return a - b;
}

static inline int64_t kdsl_mul(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : (a != 0 && b < INT64_MAX / a)))
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return a * b;
}

static inline int64_t kdsl_neg(kdsl_eval *ev, int64_t a)
{
    return a == INT64_MIN ? kdsl_fault(ev, KDSL_OVERFLOW) : -a;
}

/* Python's a // b and a % b: floored */
static inline int64_t kdsl_floordiv(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b == 0)
        return kdsl_fault(ev, "integer division or modulo by zero");
    if (a == INT64_MIN && b == -1)
        return kdsl_fault(ev, KDSL_OVERFLOW);
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t kdsl_mod(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b == 0)
        return kdsl_fault(ev, "integer division or modulo by zero");
    if (b == -1)
        return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* -(-a // b): the launcher's ceiling division */
static inline int64_t kdsl_ceil_div(kdsl_eval *ev, int64_t a, int64_t b)
{
    return kdsl_neg(ev, kdsl_floordiv(ev, kdsl_neg(ev, a), b));
}

/* rt.trunc_div, rt.trunc_mod, rt.cdiv: the DSL's truncating // and % (the IR's divsi / remsi) */
static inline int64_t kdsl_trunc_div(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b == 0)
        return kdsl_fault(ev, "integer division by zero in the jit function's launch arithmetic");
    if (a == INT64_MIN && b == -1)
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return a / b;
}

static inline int64_t kdsl_trunc_mod(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b == -1) /* no quotient needed (INT64_MIN / -1 has none in 64 bits) */
        return 0;
    int64_t q = kdsl_trunc_div(ev, a, b);
    return ev->fault ? 0 : a - b * q;
}

static inline int64_t kdsl_trunc_cdiv(kdsl_eval *ev, int64_t a, int64_t b)
{
    return kdsl_trunc_div(ev, kdsl_sub(ev, kdsl_add(ev, a, b), 1), b);
}

static inline int64_t kdsl_lshift(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b < 0)
        return kdsl_fault(ev, "negative shift count");
    if (a == 0)
        return 0;
    if (b > 62)
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return kdsl_mul(ev, a, (int64_t)1 << b);
}

static inline int64_t kdsl_rshift(kdsl_eval *ev, int64_t a, int64_t b)
{
    if (b < 0)
        return kdsl_fault(ev, "negative shift count");
    if (b > 62)
        return a < 0 ? -1 : 0;
    return a >= 0 ? a >> b : ~((~a) >> b);
}

static inline int64_t kdsl_min_i(int64_t a, int64_t b) { return b < a ? b : a; }
static inline int64_t kdsl_max_i(int64_t a, int64_t b) { return b > a ? b : a; }
static inline double kdsl_min_f(double a, double b) { return b < a ? b : a; }
static inline double kdsl_max_f(double a, double b) { return b > a ? b : a; }

static inline int64_t kdsl_u64_to_int(kdsl_eval *ev, uint64_t a)
{
    return a > (uint64_t)INT64_MAX ? kdsl_fault(ev, KDSL_OVERFLOW) : (int64_t)a;
}

/* int / int: exact for the integers a double holds exactly */
static inline double kdsl_truediv(kdsl_eval *ev, int64_t a, int64_t b)
{
    const int64_t exact = (int64_t)1 << 53;
    if (b == 0)
        return (double)kdsl_fault(ev, "division by zero");
    if (a > exact || a < -exact || b > exact || b < -exact)
        return (double)kdsl_fault(ev, "a true division of integers beyond 2**53 in the launch arithmetic");
    return (double)a / (double)b;
}

static inline double kdsl_fdiv(kdsl_eval *ev, double a, double b)
{
    return b == 0.0 ? (double)kdsl_fault(ev, "float division by zero") : a / b;
}

/* Python's float % and // (CPython's float divmod) */
static inline double kdsl_fmod(kdsl_eval *ev, double a, double b)
{
    if (b == 0.0)
        return (double)kdsl_fault(ev, "float modulo");
    double mod = fmod(a, b);
    if (mod != 0.0)
        return ((b < 0) != (mod < 0)) ? mod + b : mod;
    return copysign(0.0, b);
}

static inline double kdsl_ffloordiv(kdsl_eval *ev, double a, double b)
{
    if (b == 0.0)
        return (double)kdsl_fault(ev, "float floor division by zero");
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0 && ((b < 0) != (mod < 0)))
        div -= 1.0;
    if (div == 0.0)
        return copysign(0.0, a / b);
    double floordiv = floor(div);
    return div - floordiv > 0.5 ? floordiv + 1.0 : floordiv;
}

static inline int64_t kdsl_float_to_int(kdsl_eval *ev, double a)
{
    if (isnan(a))
        return kdsl_fault(ev, "cannot convert float NaN to integer");
    if (isinf(a))
        return kdsl_fault(ev, "cannot convert float infinity to integer");
    double t = trunc(a);
    if (t < -9223372036854775808.0 || t >= 9223372036854775808.0)
        return kdsl_fault(ev, KDSL_OVERFLOW);
    return (int64_t)t;
}

/* an int compared with a float, exactly, as Python compares them */
enum { KDSL_EQ, KDSL_NE, KDSL_LT, KDSL_LE, KDSL_GT, KDSL_GE };
static inline bool kdsl_cmp_if(int64_t a, double b, int op)
{
    int c;
    if (isnan(b))
        return op == KDSL_NE;
    if (b >= 9223372036854775808.0)
        c = -1;
    else if (b < -9223372036854775808.0)
        c = 1;
    else {
        double f = floor(b);
        int64_t fi = (int64_t)f;
        c = a < fi ? -1 : a > fi ? 1 : (f == b ? 0 : -1);
    }
    switch (op) {
    case KDSL_EQ: return c == 0;
    case KDSL_NE: return c != 0;
    case KDSL_LT: return c < 0;
    case KDSL_LE: return c <= 0;
    case KDSL_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ----- kernel parameters: the values Python's struct packing accepts, converted as it converts ----- */
KDSL_COLD static void kdsl_detail(kdsl_eval *ev, const char *format, ...) KDSL_PRINTF(2, 3);
KDSL_COLD static void kdsl_detail(kdsl_eval *ev, const char *format, ...)
{
    va_list args;
    if (ev->fault != NULL)
        return;
    va_start(args, format);
    vsnprintf(kdsl_detail_text, sizeof kdsl_detail_text, format, args);
    va_end(args);
    ev->fault = kdsl_detail_text;
}

static inline int64_t kdsl_arg_int(kdsl_eval *ev, int index, const char *code, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        kdsl_detail(ev, "kernel argument %d (%s) is %lld, outside %lld..%lld", index, code, (long long)v,
                    (long long)lo, (long long)hi);
    return v;
}

static inline uint64_t kdsl_arg_u64(kdsl_eval *ev, int index, int64_t v)
{
    if (v < 0)
        kdsl_detail(ev, "kernel argument %d (u64) is %lld, which is negative", index, (long long)v);
    return (uint64_t)v;
}

static inline float kdsl_arg_f32(kdsl_eval *ev, int index, const char *code, double v)
{
    float f = (float)v;
    if (isinf(f) && !isinf(v))
        kdsl_detail(ev, "kernel argument %d (%s) is %g, too large for a 32-bit float", index, code, v);
    return f;
}

/* bfloat16 as the Python launcher rounds it: to float, then to nearest even */
static inline uint16_t kdsl_arg_bf16(kdsl_eval *ev, int index, double v)
{
    uint32_t bits;
    float f = kdsl_arg_f32(ev, index, "bf16", v);
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0)
        return (uint16_t)((bits >> 16) | 0x40u);
    return (uint16_t)((((uint64_t)bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16) & 0xFFFFu);
}

/* IEEE half, rounded to nearest even from the double (as Python's struct 'e' rounds) */
static inline uint16_t kdsl_arg_f16(kdsl_eval *ev, int index, double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    if (isnan(v))
        return (uint16_t)(sign | 0x7E00u);
    if (isinf(v))
        return (uint16_t)(sign | 0x7C00u);
    double a = fabs(v);
    if (a == 0.0)
        return sign;
    int exponent;
    double fraction = frexp(a, &exponent) * 2.0; /* a = fraction * 2^(exponent - 1), 1 <= fraction < 2 */
    exponent -= 1;
    double scaled = exponent < -14 ? ldexp(a, 24) : (fraction - 1.0) * 1024.0;
    double whole = floor(scaled), rest = scaled - whole;
    uint32_t m = (uint32_t)whole;
    if (rest > 0.5 || (rest == 0.5 && (m & 1u)))
        ++m;
    if (exponent < -14)
        return (uint16_t)(sign | m); /* m == 1024 is the smallest normal number */
    if (m == 1024) {
        m = 0;
        ++exponent;
    }
    if (exponent > 15) {
        kdsl_detail(ev, "kernel argument %d (f16) is %g, too large for a 16-bit float", index, v);
        return sign;
    }
    return (uint16_t)(sign | (uint32_t)(exponent + 15) << 10 | m);
}

"""
