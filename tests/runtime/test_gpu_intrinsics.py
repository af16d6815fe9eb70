"""Warp, math, atomic and fp8 intrinsics on the GPU, checked against PyTorch (marked gpu).

Each kernel here also compiles on the CPU (the tests without the marker): its PTX carries
the instruction the GPU test relies on.
"""

from __future__ import annotations

import math
import re

import pytest

import dsl
from dsl import Int32, Tensor, bf16, boolean, f8e4m3, f8e5m2, f16, f32, f64, i32, i64

BLOCK = 256
NEG_INF, POS_INF = float("-inf"), float("inf")


def gid():
    return dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x


# --- kernels -------------------------------------------------------------------------------

@dsl.kernel
def math_kernel(x: Tensor[f32], p: Tensor[f32], out: Tensor[f32, 2], n: Int32):
    i = gid()
    if i < n:
        v = x[i]
        w = p[i]
        out[0, i] = dsl.erf(v)
        out[1, i] = dsl.erfc(v)
        out[2, i] = dsl.exp2(v)
        out[3, i] = dsl.log2(w)
        out[4, i] = dsl.log1p(w)
        out[5, i] = dsl.expm1(v)
        out[6, i] = dsl.pow(w, v)
        out[7, i] = dsl.atan2(v, w - 1.0)
        out[8, i] = dsl.round(v * 4.0)
        out[9, i] = dsl.trunc(v * 4.0)


@dsl.kernel
def classify_kernel(x: Tensor[f32], nan: Tensor[boolean], inf: Tensor[boolean], n: Int32):
    i = gid()
    if i < n:
        nan[i] = dsl.isnan(x[i])
        inf[i] = dsl.isinf(x[i])


@dsl.kernel
def shuffle_kernel(h: Tensor[f16], b: Tensor[bf16], d: Tensor[f64], q: Tensor[f8e4m3], v: Tensor[f32],
                   oh: Tensor[f16], ob: Tensor[bf16], od: Tensor[f64], ol: Tensor[i64], oq: Tensor[f8e4m3],
                   ov: Tensor[f32], w: Tensor[i64]):
    i = gid()
    oh[i] = dsl.shfl_xor(h[i], 1)
    ob[i] = dsl.shfl_xor(b[i], 2)
    od[i] = dsl.shfl_idx(d[i], 5)
    ol[i] = dsl.shfl_down(w[i], 3)
    oq[i] = dsl.shfl_xor(q[i], 31)
    ov.vstore(i * 4, dsl.shfl_up(v.vload(i * 4, 4), 1))


@dsl.kernel
def vote_kernel(x: Tensor[f32], k: Tensor[i32], out: Tensor[i32, 2]):
    i = gid()
    p = x[i] > 0.0
    out[0, i] = dsl.bitcast(dsl.ballot(p), i32)
    out[1, i] = dsl.cast(dsl.any(p), i32)
    out[2, i] = dsl.cast(dsl.all(p), i32)
    out[3, i] = dsl.bitcast(dsl.match_any(k[i]), i32)


@dsl.kernel
def reduce_kernel(x: Tensor[f32], k: Tensor[i32], out: Tensor[f32, 2], iout: Tensor[i32, 2]):
    i = gid()
    out[0, i] = dsl.warp_reduce(x[i], "sum")
    out[1, i] = dsl.warp_reduce(x[i], "max")
    out[2, i] = dsl.warp_reduce(x[i], "min", width=8)
    iout[0, i] = dsl.warp_reduce(k[i], "sum")
    iout[1, i] = dsl.warp_reduce(k[i], "max")
    iout[2, i] = dsl.cast(dsl.warp_reduce(x[i] > 0.0, "or"), i32)


@dsl.kernel
def bitcast_kernel(x: Tensor[f32], h: Tensor[f16], xi: Tensor[i32], hi: Tensor[i32], back: Tensor[f32]):
    i = gid()
    xi[i] = dsl.bitcast(x[i], i32)
    hi[i] = dsl.bitcast(h.vload(i * 2, 2), i32)
    back[i] = dsl.bitcast(xi[i], f32)


@dsl.kernel
def extremes_kernel(x: Tensor[f32], out: Tensor[f32], n: Int32):
    i = gid()
    if i < n:
        dsl.atomic_max(out, 0, x[i])
        dsl.atomic_min(out, 1, x[i])


@dsl.kernel
def block_max_kernel(x: Tensor[f32], out: Tensor[f32], n: Int32):
    smem = dsl.SharedAllocator()
    m = smem.array(f32, 1)
    if dsl.thread_idx.x == 0:
        m[0] = NEG_INF
    dsl.barrier()
    i = gid()
    if i < n:
        dsl.atomic_max(m, 0, x[i], scope="block")
    dsl.barrier()
    if dsl.thread_idx.x == 0:
        out[dsl.block_idx.x] = m[0]


@dsl.kernel
def half_add_kernel(h: Tensor[f16], b: Tensor[bf16], hp: Tensor[f16], bp: Tensor[bf16]):
    i = gid()
    dsl.atomic_add(h, i % 8, 1.0)
    dsl.atomic_add(b, i % 8, 1.0)
    pair = (i % 4) * 2
    dsl.atomic_add(hp, pair, dsl.vector(f16(1.0), f16(2.0)))
    dsl.atomic_add(bp, pair, dsl.vector(bf16(1.0), bf16(2.0)))


@dsl.kernel
def counter_kernel(c: Tensor[i64], d: Tensor[i64], e: Tensor[i32], per_block: Tensor[i32]):
    cur = c[0]
    prev = cur + 1
    while prev != cur:  # a CAS loop: retry with what the failed swap saw
        prev = cur
        cur = dsl.atomic_cas(c, 0, prev, prev + 1)
    cur2 = d[0]
    prev2 = cur2 + 1
    while prev2 != cur2:
        prev2 = cur2
        cur2 = dsl.atomic_cas(d, 0, prev2, prev2 + 1, order="acq_rel", scope="system")
    dsl.atomic_add(e, 0, 1, order="acq_rel", scope="device")
    dsl.atomic_add(e, 1, 2, order="release", scope="system")
    smem = dsl.SharedAllocator()
    s = smem.array(i32, 1)
    if dsl.thread_idx.x == 0:
        s[0] = 0
    dsl.barrier()
    dsl.atomic_add(s, 0, 1, scope="block")
    dsl.barrier()
    if dsl.thread_idx.x == 0:
        per_block[dsl.block_idx.x] = s[0]


@dsl.kernel
def fp8_decode_kernel(q: Tensor[f8e4m3], r: Tensor[f8e5m2], out: Tensor[f32, 2]):
    i = gid()
    out[0, i] = dsl.cast(q[i], f32)
    out[1, i] = dsl.cast(r[i], f32)


@dsl.kernel
def fp8_encode_kernel(x: Tensor[f32], h: Tensor[f16], q: Tensor[f8e4m3], qv: Tensor[f8e4m3], qh: Tensor[f8e4m3],
                      r: Tensor[f8e5m2], n: Int32):
    i = gid()
    if i < n:
        q[i] = dsl.cast(x[i], f8e4m3)
        qh[i] = h[i].to(f8e4m3)
        r[i] = f8e5m2(x[i])
    if i * 4 + 4 <= n:
        qv.vstore(i * 4, dsl.cast(x.vload(i * 4, 4), f8e4m3))


# --- jit wrappers (one launch each) ----------------------------------------------------------

@dsl.jit
def run_math(x: Tensor[f32], p: Tensor[f32], out: Tensor[f32, 2]):
    n = x.shape[0]
    math_kernel(x, p, out, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@dsl.jit
def run_classify(x: Tensor[f32], nan: Tensor[boolean], inf: Tensor[boolean]):
    n = x.shape[0]
    classify_kernel(x, nan, inf, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@dsl.jit
def run_shuffles(h: Tensor[f16], b: Tensor[bf16], d: Tensor[f64], q: Tensor[f8e4m3], v: Tensor[f32],
                 oh: Tensor[f16], ob: Tensor[bf16], od: Tensor[f64], ol: Tensor[i64], oq: Tensor[f8e4m3],
                 ov: Tensor[f32], w: Tensor[i64]):
    shuffle_kernel(h, b, d, q, v, oh, ob, od, ol, oq, ov, w).launch(grid=h.shape[0] // 64, block=64)


@dsl.jit
def run_votes(x: Tensor[f32], k: Tensor[i32], out: Tensor[i32, 2]):
    vote_kernel(x, k, out).launch(grid=x.shape[0] // 64, block=64)


@dsl.jit
def run_reduces(x: Tensor[f32], k: Tensor[i32], out: Tensor[f32, 2], iout: Tensor[i32, 2]):
    reduce_kernel(x, k, out, iout).launch(grid=x.shape[0] // 64, block=64)


@dsl.jit
def run_bitcasts(x: Tensor[f32], h: Tensor[f16], xi: Tensor[i32], hi: Tensor[i32], back: Tensor[f32]):
    bitcast_kernel(x, h, xi, hi, back).launch(grid=x.shape[0] // 64, block=64)


@dsl.jit
def run_extremes(x: Tensor[f32], out: Tensor[f32]):
    n = x.shape[0]
    extremes_kernel(x, out, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@dsl.jit
def run_block_max(x: Tensor[f32], out: Tensor[f32]):
    n = x.shape[0]
    block_max_kernel(x, out, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


@dsl.jit
def run_half_adds(h: Tensor[f16], b: Tensor[bf16], hp: Tensor[f16], bp: Tensor[bf16]):
    half_add_kernel(h, b, hp, bp).launch(grid=4, block=BLOCK)


@dsl.jit
def run_counters(c: Tensor[i64], d: Tensor[i64], e: Tensor[i32], per_block: Tensor[i32]):
    counter_kernel(c, d, e, per_block).launch(grid=per_block.shape[0], block=BLOCK)


@dsl.jit
def run_fp8_decode(q: Tensor[f8e4m3], r: Tensor[f8e5m2], out: Tensor[f32, 2]):
    fp8_decode_kernel(q, r, out).launch(grid=1, block=256)


@dsl.jit
def run_fp8_encode(x: Tensor[f32], h: Tensor[f16], q: Tensor[f8e4m3], qv: Tensor[f8e4m3], qh: Tensor[f8e4m3],
                   r: Tensor[f8e5m2]):
    n = x.shape[0]
    fp8_encode_kernel(x, h, q, qv, qh, r, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)


# --- on the CPU: the instructions the GPU tests rely on ------------------------------------------

@pytest.mark.parametrize("fn, instructions", [
    (run_math, ["cvt.rni.f32.f32", "cvt.rzi.f32.f32", "ex2.approx"]),
    (run_classify, ["setp.nan.f32", "and.b32"]),  # a compared abs clears the sign as bits
    (run_shuffles, ["shfl.sync.bfly.b32", "shfl.sync.idx.b32", "shfl.sync.down.b32", "shfl.sync.up.b32"]),
    (run_votes, ["vote.sync.ballot.b32", "vote.sync.any.pred", "vote.sync.all.pred", "match.any.sync.b32"]),
    (run_reduces, ["redux.sync.add.s32", "redux.sync.max.s32", "vote.sync.any.pred", "max.NaN.f32"]),
    (run_extremes, ["atom.global.max.s32", "atom.global.min.u32", "atom.global.min.s32", "atom.global.max.u32"]),
    (run_block_max, ["atom.relaxed.cta.shared.max.s32", "atom.relaxed.cta.shared.min.u32"]),
    (run_half_adds, ["atom.global.add.noftz.f16", "atom.global.add.noftz.bf16", "atom.global.add.noftz.f16x2",
                     "atom.global.add.noftz.bf16x2"]),
    (run_counters, ["atom.relaxed.gpu.global.cas.b64", "atom.acq_rel.sys.global.cas.b64",
                    "atom.acq_rel.gpu.global.add.u32", "atom.release.sys.global.add.u32",
                    "atom.relaxed.cta.shared.add.u32"]),
    (run_fp8_decode, ["cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2"]),
    (run_fp8_encode, ["cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e5m2x2.f32"]),
])
def test_kernel_compiles_to_its_key_instructions(fn, instructions):
    ptx = dsl.compile(fn, target="sm_90").ptx
    found = set(re.findall(r"^\s+([a-z][\w.]*)", ptx, re.M))
    assert [i for i in instructions if not any(f.startswith(i) for f in found)] == []


def test_the_examples_compile_to_their_key_instructions():
    from examples.fp8_quantize import run_fp8_quantize
    from examples.gelu_bf16 import run_gelu_bf16

    ptx = dsl.compile(run_fp8_quantize).ptx
    for op in ("atom.global.max.s32", "atom.global.min.u32", "div.rn.f32", "cvt.rn.satfinite.e4m3x2.f32",
               "shl.b32"):  # bf16 widened as its bits
        assert op in ptx, op
    ptx = dsl.compile(run_gelu_bf16).ptx
    assert "cvt.rn.bf16x2.f32" in ptx and "ld.global.v4.b32" in ptx and "call" not in ptx  # erff inlined


# --- on the GPU -------------------------------------------------------------------------------------

def _bf16_within_one_ulp(torch, y, ref):
    diff = (y.float() - ref.float()).abs()
    return bool((diff <= ref.float().abs() * 2.0**-7).all())


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, (1 << 20) + 3])
def test_gelu_bf16_matches_torch(torch, n):
    from examples.gelu_bf16 import run_gelu_bf16

    x = (torch.randn(n, device="cuda") * 3).to(torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    run_gelu_bf16(x, y)
    torch.cuda.synchronize()
    ref = torch.nn.functional.gelu(x, approximate="none")
    assert _bf16_within_one_ulp(torch, y, ref)
    assert (y == ref).float().mean().item() >= 0.999


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4096, (1 << 20) + 5])
def test_fp8_quantize_matches_torch(torch, n):
    from examples.fp8_quantize import run_fp8_quantize

    x = (torch.randn(n, device="cuda") * 5).to(torch.bfloat16)
    q = torch.empty(n, device="cuda", dtype=torch.float8_e4m3fn)
    amax = torch.zeros(1, device="cuda")
    scale_inv = torch.zeros(1, device="cuda")
    run_fp8_quantize(x, q, amax, scale_inv)
    torch.cuda.synchronize()
    ref_amax = x.float().abs().max()
    assert amax.item() == ref_amax.item()
    scale = torch.tensor(448.0, device="cuda") / torch.clamp(ref_amax, min=1e-12)
    ref_q = (x.float() * scale).to(torch.float8_e4m3fn)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
    # a tensor divisor: torch multiplies by the reciprocal of a Python-number divisor instead
    assert scale_inv.item() == (ref_amax / torch.tensor(448.0, device="cuda")).item()


@pytest.mark.gpu
def test_math_functions_match_torch(torch):
    n = 1 << 16
    x = torch.randn(n, device="cuda") * 2
    x[:6] = torch.tensor([0.125, 0.375, -0.625, 0.875, -0.125, 2.0])  # x * 4: exact ties for round()
    p = torch.rand(n, device="cuda") * 5 + 0.1
    out = torch.full((10, n), float("nan"), device="cuda")
    run_math(x, p, out)
    torch.cuda.synchronize()
    v, w = x.double(), p.double()
    refs = [torch.erf(v), torch.erfc(v), torch.exp2(v), torch.log2(w), torch.log1p(w), torch.expm1(v),
            torch.pow(w, v), torch.atan2(v, (p - 1.0).double())]
    for row, ref in enumerate(refs):
        assert torch.allclose(out[row].double(), ref, rtol=2e-6, atol=1e-7), row
    assert torch.equal(out[8], torch.round(x * 4))  # ties to even, as torch
    assert out[8, :4].tolist() == [0.0, 2.0, -2.0, 4.0]
    assert torch.equal(out[9], torch.trunc(x * 4))


@pytest.mark.gpu
def test_isnan_and_isinf_match_torch(torch):
    x = torch.tensor([0.0, -0.0, 1.0, float("nan"), float("inf"), float("-inf"), -float("nan"), 3.4e38,
                      1e-45, -2.5], device="cuda")
    nan = torch.zeros(x.shape[0], dtype=torch.bool, device="cuda")
    inf = torch.zeros_like(nan)
    run_classify(x, nan, inf)
    torch.cuda.synchronize()
    assert torch.equal(nan, torch.isnan(x)) and torch.equal(inf, torch.isinf(x))


def _as_i32(mask):
    return mask - (1 << 32) if mask >= 1 << 31 else mask


def _lane_reference(torch, values, width, fn):
    """fn(group of `width` values) applied per group, its result broadcast back per lane."""
    groups = values.reshape(-1, width)
    return torch.stack([fn(g) for g in groups]).repeat_interleave(width).reshape(values.shape)


@pytest.mark.gpu
def test_shuffles_move_each_type_bit_exactly(torch):
    n = 128
    h = torch.randn(n, device="cuda").half()
    b = torch.randn(n, device="cuda").bfloat16()
    d = torch.randn(n, device="cuda", dtype=torch.float64)
    q = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    v = torch.randn(4 * n, device="cuda")
    w = torch.randint(-2**62, 2**62, (n,), device="cuda", dtype=torch.int64)
    oh, ob, od, ol = torch.empty_like(h), torch.empty_like(b), torch.empty_like(d), torch.empty_like(w)
    oq, ov = torch.empty_like(q), torch.empty_like(v)
    run_shuffles(h, b, d, q, v, oh, ob, od, ol, oq, ov, w)
    torch.cuda.synchronize()
    lane = torch.arange(n, device="cuda")
    base = lane - lane % 32
    assert torch.equal(oh.view(torch.int16), h[lane ^ 1].view(torch.int16))
    assert torch.equal(ob.view(torch.int16), b[lane ^ 2].view(torch.int16))
    assert torch.equal(od, d[base + 5])
    down = torch.where(lane % 32 + 3 < 32, lane + 3, lane)  # past the warp's end: its own value
    assert torch.equal(ol, w[down])
    assert torch.equal(oq.view(torch.uint8), q.view(torch.uint8)[lane ^ 31])
    up = torch.where(lane % 32 >= 1, lane - 1, lane)
    assert torch.equal(ov.reshape(n, 4), v.reshape(n, 4)[up])


@pytest.mark.gpu
def test_votes_and_match_any_match_a_reference(torch):
    n = 128
    x = torch.randn(n, device="cuda")
    x[64:96] = x[64:96].abs() + 1  # warp 2: all positive
    x[96:] = -x[96:].abs() - 1  # warp 3: none positive
    k = torch.randint(0, 4, (n,), device="cuda", dtype=torch.int32)
    out = torch.zeros(4, n, dtype=torch.int32, device="cuda")
    run_votes(x, k, out)
    torch.cuda.synchronize()
    xs, ks = (x > 0).tolist(), k.tolist()
    expected = [[], [], [], []]
    for i in range(n):
        warp = range(i - i % 32, i - i % 32 + 32)
        ballot = sum(1 << (j % 32) for j in warp if xs[j])
        match = sum(1 << (j % 32) for j in warp if ks[j] == ks[i])
        expected[0].append(_as_i32(ballot))
        expected[1].append(int(any(xs[j] for j in warp)))
        expected[2].append(int(all(xs[j] for j in warp)))
        expected[3].append(_as_i32(match))
    assert out.tolist() == expected
    assert expected[2][64] == 1 and expected[1][96] == 0  # both outcomes of all/any are exercised


@pytest.mark.gpu
def test_warp_reductions_match_torch(torch):
    n = 128
    x = torch.randn(n, device="cuda")
    k = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    out = torch.zeros(3, n, device="cuda")
    iout = torch.zeros(3, n, dtype=torch.int32, device="cuda")
    run_reduces(x, k, out, iout)
    torch.cuda.synchronize()
    assert torch.allclose(out[0].double(), _lane_reference(torch, x.double(), 32, torch.sum), rtol=1e-5, atol=1e-5)
    assert torch.equal(out[1], _lane_reference(torch, x, 32, torch.max))
    assert torch.equal(out[2], _lane_reference(torch, x, 8, torch.min))
    assert torch.equal(iout[0], _lane_reference(torch, k, 32, torch.sum).int())
    assert torch.equal(iout[1], _lane_reference(torch, k, 32, torch.max))
    assert torch.equal(iout[2], _lane_reference(torch, (x > 0).int(), 32, torch.max))


@pytest.mark.gpu
def test_bitcast_matches_torch_views(torch):
    n = 128
    x = torch.randn(n, device="cuda")
    h = torch.randn(2 * n, device="cuda").half()
    xi, hi = torch.empty(n, dtype=torch.int32, device="cuda"), torch.empty(n, dtype=torch.int32, device="cuda")
    back = torch.empty_like(x)
    run_bitcasts(x, h, xi, hi, back)
    torch.cuda.synchronize()
    assert torch.equal(xi, x.view(torch.int32)) and torch.equal(hi, h.view(torch.int32))
    assert torch.equal(back, x)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["mixed", "negative", "positive", "signed_zeros", "nan"])
def test_f32_atomic_max_and_min_are_exact(torch, case):
    x = torch.randn(1 << 16, device="cuda") * 10
    if case == "negative":
        x = -x.abs() - 1
    elif case == "positive":
        x = x.abs() + 1
    elif case == "signed_zeros":
        x = torch.tensor([-0.0, 0.0, -0.0, 0.0], device="cuda")
    elif case == "nan":
        x[1234] = float("nan")
    out = torch.tensor([NEG_INF, POS_INF], device="cuda")
    run_extremes(x, out)
    torch.cuda.synchronize()
    if case == "nan":
        assert math.isnan(out[0].item()) and math.isnan(out[1].item())  # NaN propagates, as torch.amax
    elif case == "signed_zeros":
        assert out.tolist() == [0.0, 0.0] and torch.signbit(out).tolist() == [False, True]  # -0.0 < +0.0
    else:
        assert out.tolist() == [x.max().item(), x.min().item()]


@pytest.mark.gpu
def test_shared_memory_f32_atomic_max_per_block(torch):
    n = 10 * BLOCK + 17
    x = torch.randn(n, device="cuda") - 2
    out = torch.full((11,), float("nan"), device="cuda")
    run_block_max(x, out)
    torch.cuda.synchronize()
    ref = torch.nn.functional.pad(x, (0, 11 * BLOCK - n), value=NEG_INF).reshape(11, BLOCK).max(1).values
    assert torch.equal(out, ref)


@pytest.mark.gpu
def test_half_atomic_adds_and_packed_pairs(torch):
    h = torch.zeros(8, dtype=torch.float16, device="cuda")
    b = torch.zeros(8, dtype=torch.bfloat16, device="cuda")
    hp, bp = torch.zeros_like(h), torch.zeros_like(b)
    run_half_adds(h, b, hp, bp)  # 1024 threads
    torch.cuda.synchronize()
    assert h.tolist() == [128.0] * 8 and b.tolist() == [128.0] * 8
    assert hp.tolist() == [256.0, 512.0] * 4 and bp.tolist() == [256.0, 512.0] * 4


@pytest.mark.gpu
def test_64_bit_cas_loops_and_ordered_adds_count_exactly(torch):
    blocks = 16
    c = torch.tensor([2**33], dtype=torch.int64, device="cuda")
    d = torch.tensor([-(2**40)], dtype=torch.int64, device="cuda")
    e = torch.zeros(2, dtype=torch.int32, device="cuda")
    per_block = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    run_counters(c, d, e, per_block)
    torch.cuda.synchronize()
    threads = blocks * BLOCK
    assert c.item() == 2**33 + threads and d.item() == -(2**40) + threads
    assert e.tolist() == [threads, 2 * threads] and per_block.tolist() == [BLOCK] * blocks


@pytest.mark.gpu
def test_fp8_to_f32_is_exact_for_every_code(torch):
    codes = torch.arange(256, device="cuda", dtype=torch.int32).to(torch.uint8)
    q, r = codes.view(torch.float8_e4m3fn), codes.view(torch.float8_e5m2)
    out = torch.zeros(2, 256, device="cuda")
    run_fp8_decode(q, r, out)
    torch.cuda.synchronize()
    for row, ref in ((0, q.float()), (1, r.float())):
        assert torch.equal(torch.isnan(out[row]), torch.isnan(ref))
        keep = ~torch.isnan(ref)
        assert torch.equal(out[row][keep], ref[keep])


def _fp8_encode(torch, values):
    x = values.to("cuda", torch.float32)
    n = x.shape[0]
    outs = [torch.empty(n, device="cuda", dtype=torch.float8_e4m3fn) for _ in range(3)]
    r = torch.empty(n, device="cuda", dtype=torch.float8_e5m2)
    run_fp8_encode(x, x.half(), *outs, r)
    torch.cuda.synchronize()
    return [o.view(torch.uint8) for o in outs] + [r.view(torch.uint8)]


@pytest.mark.gpu
def test_f32_and_f16_to_fp8_match_torch_in_range(torch):
    e4m3_values = torch.arange(256, device="cuda", dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    finite = e4m3_values.float()[~torch.isnan(e4m3_values.float())].sort().values
    midpoints = (finite[1:] + finite[:-1]) / 2  # ties: round to the even code
    raw = torch.cat([torch.randn(3000, device="cuda") * 100, torch.randn(1000, device="cuda") * 2**-8,
                     finite, midpoints]).clamp(-448, 448)
    x = raw.half().float()  # f16 values: one rounding on every path, as torch rounds them
    x = x[: x.shape[0] // 4 * 4]
    q, qv, qh, r = _fp8_encode(torch, x)
    ref = x.to(torch.float8_e4m3fn).view(torch.uint8)
    assert torch.equal(q, ref) and torch.equal(qv, ref) and torch.equal(qh, ref)
    assert torch.equal(r, x.to(torch.float8_e5m2).view(torch.uint8))


@pytest.mark.gpu
def test_fp8_conversions_saturate_and_keep_nan(torch):
    x = torch.tensor([500.0, -1e9, float("inf"), float("-inf"), 464.0, -470.0, float("nan"), 1e5])
    q, qv, qh, r = _fp8_encode(torch, x)
    assert q[:6].tolist() == [0x7E, 0xFE, 0x7E, 0xFE, 0x7E, 0xFE] and q[6].item() & 0x7F == 0x7F
    assert torch.equal(qv, q)
    assert r[[1, 2, 3, 7]].tolist() == [0xFB, 0x7B, 0xFB, 0x7B]  # e5m2 saturates at +-57344 (500 is in range)
