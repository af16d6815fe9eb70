"""The C helpers every export carries compute what Python computes: `repr` of a float, `//` and
`%` of ints and floats, the DSL's truncating division and `dsl.cdiv`, shifts, and packing into
f16 / bf16 / f32 parameters (or refusing, where Python's `struct` raises).

One C program (the export's support code and a `main` reading operations from stdin) is
built with gcc and fed a few thousand operands, edge cases and seeded random ones; each
answer is compared with Python's own."""

from __future__ import annotations

import math
import random
import struct
import subprocess

import pytest

from dsl.export import emit_c
from dsl.export.c_support import PRELUDE
from dsl.export.model import Export
from dsl.runtime.launch import Runtime, _bf16_bits
from tests.export.conftest import have_gcc

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")

MAIN = r"""
static void show_fault(kdsl_eval *ev) { printf("%s\n", ev->fault ? "fault" : ""); }

int main(void)
{
    char op[16];
    while (scanf("%15s", op) == 1) {
        kdsl_eval ev = {0};
        if (op[0] == 'r' || op[0] == 'h' || op[0] == 'b' || op[0] == 'F') { /* one double, as its bits */
            unsigned long long bits;
            double v;
            if (scanf("%llx", &bits) != 1)
                return 1;
            memcpy(&v, &bits, sizeof v);
            if (op[0] == 'r') {
                char text[64];
                kdsl_msg m = {text, sizeof text, 0};
                text[0] = 0;
                kdsl_msg_float(&m, v, 'r', 0, 0, 0);
                printf("%s\n", text);
            } else if (op[0] == 'h' || op[0] == 'b') {
                unsigned int out = op[0] == 'h' ? kdsl_arg_f16(&ev, 0, v) : kdsl_arg_bf16(&ev, 0, v);
                if (ev.fault)
                    show_fault(&ev);
                else
                    printf("%04x\n", out);
            } else {
                float f = kdsl_arg_f32(&ev, 0, "f32", v);
                unsigned int out;
                memcpy(&out, &f, sizeof out);
                if (ev.fault)
                    show_fault(&ev);
                else
                    printf("%08x\n", out);
            }
        } else if (op[0] == 'f') { /* two doubles: a // b and a % b */
            unsigned long long x, y;
            double a, b;
            if (scanf("%llx %llx", &x, &y) != 2)
                return 1;
            memcpy(&a, &x, sizeof a);
            memcpy(&b, &y, sizeof b);
            double q = kdsl_ffloordiv(&ev, a, b), r = kdsl_fmod(&ev, a, b);
            memcpy(&x, &q, sizeof q);
            memcpy(&y, &r, sizeof r);
            if (ev.fault)
                show_fault(&ev);
            else
                printf("%016llx %016llx\n", x, y);
        } else { /* two ints */
            long long a, b, out;
            if (scanf("%lld %lld", &a, &b) != 2)
                return 1;
            switch (op[0]) {
            case 'd': out = kdsl_floordiv(&ev, a, b); break;
            case 'm': out = kdsl_mod(&ev, a, b); break;
            case 't': out = kdsl_trunc_div(&ev, a, b); break;
            case 'u': out = kdsl_trunc_mod(&ev, a, b); break;
            case 'c': out = kdsl_trunc_cdiv(&ev, a, b); break;
            case 'C': out = kdsl_ceil_div(&ev, a, b); break;
            case 'l': out = kdsl_lshift(&ev, a, b); break;
            case 's': out = kdsl_rshift(&ev, a, b); break;
            default: out = kdsl_mul(&ev, a, b); break;
            }
            if (ev.fault)
                show_fault(&ev);
            else
                printf("%lld\n", out);
        }
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("support")
    (folder / "t.h").write_text(emit_c.header(Export("t", [])))
    (folder / "t.c").write_text('#include "t.h"\n' + PRELUDE + MAIN)
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused", "-o", str(folder / "t"),
                    str(folder / "t.c"), "-lm"], check=True)

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run([str(folder / "t")], input="\n".join(lines) + "\n", capture_output=True, text=True,
                              check=True)
        return done.stdout.splitlines()

    return run


def bits(v: float) -> str:
    return struct.pack("<d", v)[::-1].hex()


def doubles() -> list[float]:
    rng = random.Random(0)
    edge = [0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 123456789.0, 1.5e300,
            5e-324, 2.2250738585072014e-308, 65504.0, 65519.99, 65520.0, 6.1e-5, 5.960464477539063e-08,
            2.9802322387695312e-08, 2.980232238769532e-08, 3.4028235e38, 3.4028236e38, 3.5e38, float("inf"),
            -float("inf"), float("nan"), 0.5, 2.5, -2.5, 1.00048828125, 1.000244140625]
    rand = [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 12) for _ in range(1500)]
    rand += [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(500)]
    return edge + rand


def test_float_repr_is_pythons(helpers):
    values = [v for v in doubles() if not math.isnan(v)] + [float("nan")]
    assert helpers([f"r {bits(v)}" for v in values]) == [repr(v) for v in values]


def python_pack(code: str, v: float) -> str:
    try:
        if code == "h":
            return struct.pack("<e", v)[::-1].hex()
        if code == "F":
            return struct.pack("<f", v)[::-1].hex()
        return f"{_bf16_bits(v):04x}"
    except OverflowError:
        return "fault"


@pytest.mark.parametrize("code", ["h", "b", "F"])
def test_half_bfloat_and_float_parameters_pack_as_python_packs_them(helpers, code):
    values = [v for v in doubles() if not math.isnan(v)]
    got = helpers([f"{code} {bits(v)}" for v in values])
    assert got == [python_pack(code, v) for v in values]


def test_float_floor_division_and_modulo_are_pythons(helpers):
    rng = random.Random(1)
    pairs = [(a, b) for a in (7.5, -7.5, 0.0, -0.0, 1e300, 3.0) for b in (2.0, -2.0, 0.1, -1e-300, 3.0, float("inf"))]
    pairs += [(rng.uniform(-1e6, 1e6), rng.choice([-1, 1]) * rng.uniform(1e-3, 1e3)) for _ in range(1000)]
    got = helpers([f"f {bits(a)} {bits(b)}" for a, b in pairs])
    want = [f"{bits(a // b)} {bits(a % b)}" for a, b in pairs]
    assert got == want


INT_OPS = {
    "d": lambda a, b: a // b, "m": lambda a, b: a % b, "t": Runtime.trunc_div, "u": Runtime.trunc_mod,
    "c": Runtime.cdiv, "C": lambda a, b: -(-a // b), "l": lambda a, b: a << b, "s": lambda a, b: a >> b,
    "x": lambda a, b: a * b,
}


@pytest.mark.parametrize("op", sorted(INT_OPS))
def test_integer_arithmetic_is_pythons_or_refused_beyond_64_bits(helpers, op):
    rng = random.Random(2)
    small = [0, 1, -1, 2, -2, 3, 7, -7, 8, 13, -13, 2**31 - 1, -(2**31), 2**62, 2**63 - 1, -(2**63)]
    pairs = [(a, b) for a in small for b in small]
    pairs += [(rng.randint(-(2**40), 2**40), rng.randint(-(2**20), 2**20)) for _ in range(500)]
    if op in "ls":
        pairs = [(a, b % 70 - 3) for a, b in pairs]
    lines, want = [], []
    for a, b in pairs:
        try:
            value = INT_OPS[op](a, b)
        except (ZeroDivisionError, ValueError, ArithmeticError, Exception):
            value = None
        lines.append(f"{op} {a} {b}")
        want.append("fault" if value is None or not -(2**63) <= value < 2**63 else str(value))
    got = helpers(lines)
    # the C also refuses an intermediate beyond 64 bits (e.g. in cdiv's a + b - 1), where Python's result fits
    mismatched = [(line, g, w) for line, g, w in zip(lines, got, want) if g != w]
    assert all(g == "fault" and op in "cC" for _, g, _ in mismatched), mismatched[:5]
