"""A Llama-style decoder layer made of kdsl kernels, as PyTorch operators, and its PyTorch twin.

    h = x + o_proj(attention(rope(qkv_proj(rmsnorm(x)))))       out = h + down(swiglu(gate_up(rmsnorm(h))))

Llama-3-8B's shapes by default (`LlamaConfig`): hidden 4096, 32 query heads sharing 8 K/V heads
(grouped-query attention), head dim 128, a SwiGLU MLP of 14336, RMSNorm eps 1e-5, RoPE theta
500000; bf16 tensors, f32 arithmetic inside every kernel.

The GEMMs compute `c = a @ b_t.T` with the weights as `nn.Linear` keeps them, q, k and v fused
into one projection, gate and up into another. Prefill's four projections (M = S rows) are
`examples/gemm_hopper.py`; decode's (M = B, one row per sequence: memory-bound, where
gemm_hopper's 128-row tiles are mostly padding) are `examples/gemm_small_m.py`'s swapped split-K
kernel, each with the plan `plan_for` gives its (B, N, K) (gemm_hopper where that says so: B
above 128). Prefill attention is `examples/attention_hopper.py` (causal, GQA) and decode
attention `examples/attention_decode.py`. What is not a GEMM or attention is a small
memory-bound kernel here, one pass over its bytes:

- `rmsnorm_kernel` / `add_rmsnorm_kernel`: one block of 512 threads per row (a decode step's
  32 rows are 32 blocks, each thread one 16-byte load: one warp per row took 10-12 us there,
  sixteen loads one after another); the second also adds the
  residual and writes the sum `h` (rounded to bf16, as torch's `x + r` is) beside the norm;
- `rope_kernel`: rotates q and k (Llama's rotate-half pairs, `i` with `i + D/2`) from f32
  cos / sin tables while it re-lays the fused projection's rows [T, (HQ + 2 HKV) D] out as heads:
  q [B, HQ, T, D], and k, v at their positions of [B, HKV, L, D], a fresh tensor (prefill) or
  the KV cache (decode: one token per sequence at `pos`);
- `swiglu_kernel`: `silu(gate) * up` from the fused gate / up rows (decode; prefill's gate / up
  GEMM is `gemm_hopper_swiglu`, which applies it in its epilogue and writes half the bytes: the
  kdsl layer keeps that weight's rows in alternating runs of eight gate and eight up rows,
  `interleave_gate_up`, for both paths); `add_kernel`: the residual.

Each jit function becomes a functional operator (`dsl.torch.op`: it allocates its outputs), so
`KdslLlamaLayer` runs eagerly, under `torch.compile(fullgraph=True)` (any mode, CUDA graphs
included) and on CPU tensors through the interpreter. Prefill attention writes its output as the
[S, HQ, D] rows the output projection reads (the operator allocates that layout), so no
transpose runs. The decode step writes k and v into the caches (module buffers marked static,
so that CUDA graphs update them where they are) and attends to [0, pos] with
`attention_decode`, whose f32 scratch `ws` the operator allocates as a second output.
`attach_cache` also plans the decode GEMMs for the cache's batch (`plan_decode`: shapes are
static there, so a compiled step sees each plan as constants) and allocates split-K's workspace
once, zeroed, as two more static buffers shared by the four projections: f32 `decode_partials`
and i32 `decode_tickets`, which every small-M call mutates and leaves at zero (its schema marks
them `Tensor(a!)`, so functionalization keeps the writes and their order, and Inductor passes the
buffers themselves to each call, no copy). That makes the workspace shared state: two decode
steps of one layer must not run at once (on two streams, threads or overlapping CUDA-graph
replays); give each concurrent step its own layer object (the weights may be shared).
`TorchLlamaLayer` is the same layer in plain PyTorch (`F.linear`, `F.rms_norm`,
`F.scaled_dot_product_attention` with `enable_gqa`), with the same weights and RoPE tables:
the reference, and the peer.

Limits: prefill takes one sequence (S % 128 == 0); decode gives every sequence the same position
`pos`, a Python int (`attention_decode`'s `kv_len` is one scalar). torch.compile specializes on
its first value; a second value makes it a symbol, and one graph then serves every later
position (the launchers' `cdiv`, `min` and `max` of it stay symbolic: only its sign is guarded;
`tests/torch/test_llama_layer.py` steps a compiled loop through five positions).
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import dsl
import dsl.torch
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f32

try:  # without PyTorch the kernels still lint, compile and interpret; the layers need it
    torch: Any = importlib.import_module("torch")
except ModuleNotFoundError:
    torch = cast(Any, None)
F: Any = getattr(torch, "nn", None) and torch.nn.functional
_Module: Any = getattr(getattr(torch, "nn", None), "Module", object)

_EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)  # the GEMMs and attentions: the examples beside this one

from attention_decode import attention_decode, workspace_shape  # noqa: E402
from attention_hopper import attention_hopper  # noqa: E402
from gemm_hopper import gemm_hopper, gemm_hopper_swiglu, interleave_gate_up  # noqa: E402
from gemm_small_m import Plan, gemm_small_m, plan_for, sm_count_of, small_m_plan  # noqa: E402
from reductions import block_sum  # noqa: E402

PROJECTIONS = ("w_qkv", "w_o", "w_gate_up", "w_down")  # the layer's weights, in the order a step uses them
NORM_THREADS = 512  # one block per row of the norms: at hidden 4096, one 16-byte load per thread
VEC = 8  # bf16 elements per 128-bit access
BLOCK = 256  # threads per block of the element-wise kernels


@dataclass(frozen=True)
class LlamaConfig:
    """The layer's dimensions (Llama-3-8B by default)."""

    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 14336
    eps: float = 1e-5
    rope_theta: float = 500000.0
    max_positions: int = 8192


# --- kernels ------------------------------------------------------------------------------------

def _norm_scale(squares: Any, cols: Any, eps: Any) -> Any:
    """rsqrt(mean(x^2) + eps) of the block's row, from each thread's sum of squares."""
    scratch = dsl.SharedAllocator().array(f32, 32)
    return dsl.rsqrt(block_sum(squares, scratch, NORM_THREADS // 32) / dsl.cast(cols, f32) + eps)


def _scale_row(src: Any, w: Any, y: Any, row: Any, scale: Any) -> None:
    """The second pass of a norm: y = src * scale * w over the thread's columns of `row`
    (its own loads of the first pass, so from L1)."""
    for c in range(dsl.thread_idx.x * VEC, src.shape[1], NORM_THREADS * VEC):
        v = src.vload((row, c), VEC).to(f32)
        y.vstore((row, c), (v * scale * w.vload(c, VEC).to(f32)).to(bf16))


@dsl.kernel
def rmsnorm_kernel(x: Tensor[bf16, 2], w: Tensor[bf16], y: Tensor[bf16, 2], eps: Float32):
    row = dsl.block_idx.x
    squares = 0.0
    for c in range(dsl.thread_idx.x * VEC, x.shape[1], NORM_THREADS * VEC):
        v = x.vload((row, c), VEC).to(f32)
        squares += (v * v).sum()
    _scale_row(x, w, y, row, _norm_scale(squares, x.shape[1], eps))


@dsl.kernel
def add_rmsnorm_kernel(x: Tensor[bf16, 2], r: Tensor[bf16, 2], w: Tensor[bf16], y: Tensor[bf16, 2],
                       h: Tensor[bf16, 2], eps: Float32):
    row = dsl.block_idx.x
    squares = 0.0
    for c in range(dsl.thread_idx.x * VEC, x.shape[1], NORM_THREADS * VEC):
        s = (x.vload((row, c), VEC).to(f32) + r.vload((row, c), VEC).to(f32)).to(bf16)
        h.vstore((row, c), s)
        v = s.to(f32)  # the norm of the rounded sum: what the next layer's residual holds
        squares += (v * v).sum()
    _scale_row(h, w, y, row, _norm_scale(squares, x.shape[1], eps))  # reads back this thread's own stores of h


@dsl.jit
def run_rmsnorm(x: Tensor[bf16, 2], w: Tensor[bf16], y: Tensor[bf16, 2], eps: Float32 = 1e-5):
    assert x.shape[1] % VEC == 0, "the hidden size must be a multiple of 8"
    assert w.shape[0] == x.shape[1] and y.shape[0] == x.shape[0] and y.shape[1] == x.shape[1], \
        "shapes: x and y (rows, hidden), w (hidden,)"
    rmsnorm_kernel(x, w, y, eps).launch(grid=x.shape[0], block=NORM_THREADS)


@dsl.jit
def run_add_rmsnorm(x: Tensor[bf16, 2], r: Tensor[bf16, 2], w: Tensor[bf16], y: Tensor[bf16, 2],
                    h: Tensor[bf16, 2], eps: Float32 = 1e-5):
    assert x.shape[1] % VEC == 0, "the hidden size must be a multiple of 8"
    assert w.shape[0] == x.shape[1] and y.shape[0] == x.shape[0] and y.shape[1] == x.shape[1], \
        "shapes: x and y (rows, hidden), w (hidden,)"
    assert r.shape[0] == x.shape[0] and r.shape[1] == x.shape[1] and h.shape[0] == x.shape[0] \
        and h.shape[1] == x.shape[1], "r and h like x"
    add_rmsnorm_kernel(x, r, w, y, h, eps).launch(grid=x.shape[0], block=NORM_THREADS)


def _rotate(lo: Any, hi: Any, cos: Any, sin: Any, pos: Any, c: Any) -> Any:
    """Rotate-half RoPE of 8 pairs (lo[i], hi[i]) = (x[c + i], x[c + i + D/2]) at `pos`."""
    cs = dsl.vector(*cos.vload((pos, c), 4), *cos.vload((pos, c + 4), 4))
    sn = dsl.vector(*sin.vload((pos, c), 4), *sin.vload((pos, c + 4), 4))
    a, b = lo.to(f32), hi.to(f32)
    return (a * cs - b * sn).to(bf16), (b * cs + a * sn).to(bf16)


@dsl.kernel
def rope_kernel(qkv: Tensor[bf16, 3], cos: Tensor[f32, 2], sin: Tensor[f32, 2], q: Tensor[bf16, 4],
                k: Tensor[bf16, 4], v: Tensor[bf16, 4], pos0: Int32, HQ: Constexpr[int], HKV: Constexpr[int],
                D: Constexpr[int]):
    # One thread: columns c..c+7 and c+D/2..c+D/2+7 of one head of one token. The heads of a
    # token are neighbours, so a warp's 4 (D=128) heads take one branch and its loads are one run.
    heads = HQ + 2 * HKV
    t = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    tokens = qkv.shape[1]
    if t >= qkv.shape[0] * tokens * heads * (D // 16):
        return
    c = (t % (D // 16)) * VEC
    head = (t // (D // 16)) % heads
    token = t // (D // 16) // heads
    b, i = token // tokens, token % tokens
    pos = pos0 + i
    lo = qkv.vload((b, i, head * D + c), VEC)
    hi = qkv.vload((b, i, head * D + D // 2 + c), VEC)
    if head >= HQ + HKV:
        v.vstore((b, head - HQ - HKV, pos, c), lo)
        v.vstore((b, head - HQ - HKV, pos, c + D // 2), hi)
    else:
        lo, hi = _rotate(lo, hi, cos, sin, pos, c)
        if head < HQ:
            q.vstore((b, head, i, c), lo)
            q.vstore((b, head, i, c + D // 2), hi)
        else:
            k.vstore((b, head - HQ, pos, c), lo)
            k.vstore((b, head - HQ, pos, c + D // 2), hi)


@dsl.jit
def run_rope(qkv: Tensor[bf16, 3], cos: Tensor[f32, 2], sin: Tensor[f32, 2], q: Tensor[bf16, 4],
             k: Tensor[bf16, 4], v: Tensor[bf16, 4], pos0: Int32 = 0, HQ: Constexpr[int] = 32,
             HKV: Constexpr[int] = 8, D: Constexpr[int] = 128):
    B, T = qkv.shape[0], qkv.shape[1]
    assert D % 16 == 0 and HQ % HKV == 0, "head_dim a multiple of 16, heads a multiple of kv_heads"
    assert qkv.shape[2] == (HQ + 2 * HKV) * D, "qkv: [B, T, (HQ + 2 * HKV) * D]"
    assert cos.shape[1] * 2 == D and sin.shape[1] * 2 == D, "cos, sin: [positions, D / 2]"
    assert pos0 >= 0 and pos0 + T <= cos.shape[0] and pos0 + T <= k.shape[2], "positions past the tables or cache"
    assert q.shape[0] == B and q.shape[1] == HQ and q.shape[2] == T and q.shape[3] == D, "q: [B, HQ, T, D]"
    assert k.shape[0] == B and k.shape[1] == HKV and k.shape[3] == D and v.shape[0] == B and v.shape[1] == HKV \
        and v.shape[2] == k.shape[2] and v.shape[3] == D, "k, v: [B, HKV, L, D]"
    rope_kernel(qkv, cos, sin, q, k, v, pos0, HQ, HKV, D).launch(
        grid=dsl.cdiv(B * T * (HQ + 2 * HKV) * (D // 16), BLOCK), block=BLOCK)


@dsl.kernel
def swiglu_kernel(gate_up: Tensor[bf16, 2], out: Tensor[bf16, 2]):
    # gate_up's columns alternate eight gate and eight up columns (the weight's rows are
    # `interleave_gate_up`'d for prefill's fused GEMM): out columns c..c+7 read 2c and 2c + 8.
    t = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    width = out.shape[1]
    if t >= out.shape[0] * (width // VEC):
        return
    row, c = t // (width // VEC), (t % (width // VEC)) * VEC
    g = gate_up.vload((row, 2 * c), VEC).to(f32)
    u = gate_up.vload((row, 2 * c + VEC), VEC).to(f32)
    silu = dsl.vector(*[g[j] / (1.0 + dsl.exp(-g[j])) for j in dsl.static_range(VEC)])
    out.vstore((row, c), (silu * u).to(bf16))


@dsl.jit
def run_swiglu(gate_up: Tensor[bf16, 2], out: Tensor[bf16, 2]):
    assert out.shape[1] % VEC == 0 and gate_up.shape[1] == 2 * out.shape[1] and gate_up.shape[0] == out.shape[0], \
        "gate_up: [M, 2 * I] (eight gate columns, then eight up, ...), out: [M, I], I a multiple of 8"
    swiglu_kernel(gate_up, out).launch(grid=dsl.cdiv(out.shape[0] * (out.shape[1] // VEC), BLOCK), block=BLOCK)


@dsl.kernel
def add_kernel(a: Tensor[bf16, 2], b: Tensor[bf16, 2], out: Tensor[bf16, 2]):
    t = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    width = out.shape[1]
    if t >= out.shape[0] * (width // VEC):
        return
    row, c = t // (width // VEC), (t % (width // VEC)) * VEC
    out.vstore((row, c), (a.vload((row, c), VEC).to(f32) + b.vload((row, c), VEC).to(f32)).to(bf16))


@dsl.jit
def run_add(a: Tensor[bf16, 2], b: Tensor[bf16, 2], out: Tensor[bf16, 2]):
    assert a.shape[1] % VEC == 0 and b.shape[0] == a.shape[0] and b.shape[1] == a.shape[1] \
        and out.shape[0] == a.shape[0] and out.shape[1] == a.shape[1], "a, b, out: the same [M, N], N % 8 == 0"
    add_kernel(a, b, out).launch(grid=dsl.cdiv(a.shape[0] * (a.shape[1] // VEC), BLOCK), block=BLOCK)


# --- operators (torch.ops.kdsl.llama_*) ----------------------------------------------------------

def _heads_like(qkv: Any, HQ: int, D: int) -> Any:
    return qkv.new_empty(qkv.shape[0], HQ, qkv.shape[1], D)


def _kv_like(qkv: Any, HKV: int, D: int) -> Any:
    return qkv.new_empty(qkv.shape[0], HKV, qkv.shape[1], D)


def _decode_workspace(q: Any, k_cache: Any, D: int) -> Any:
    """attention_decode's f32 scratch for its KV chunks' partial results (an output nobody reads)."""
    return q.new_empty(workspace_shape(q.shape[0], q.shape[1], k_cache.shape[1], D), dtype=torch.float32)


def _rows_by_head(q: Any) -> Any:
    """Attention's output as [heads, S, D] over an [S, heads, D] buffer: the output projection's rows."""
    return q.new_empty(q.shape[1], q.shape[0], q.shape[2]).permute(1, 0, 2)


rmsnorm = dsl.torch.op(run_rmsnorm, outputs={"y": "x"}, name="llama_rmsnorm")
add_rmsnorm = dsl.torch.op(run_add_rmsnorm, outputs={"y": "x", "h": "x"}, name="llama_add_rmsnorm")
rope_prefill = dsl.torch.op(run_rope, outputs={"q": _heads_like, "k": _kv_like, "v": _kv_like},
                            name="llama_rope_prefill")
rope_decode = dsl.torch.op(run_rope, outputs={"q": _heads_like}, name="llama_rope_decode")  # k, v: the caches
swiglu = dsl.torch.op(run_swiglu, outputs={"out": lambda gate_up: gate_up.new_empty(gate_up.shape[0],
                                                                                    gate_up.shape[1] // 2)},
                      name="llama_swiglu")
add = dsl.torch.op(run_add, outputs={"out": "a"}, name="llama_add")
def _product(a: Any, b_t: Any) -> Any:
    """c of `c = a @ b_t.T`: [M, N] like a."""
    return a.new_empty(a.shape[0], b_t.shape[0])


gemm = dsl.torch.op(gemm_hopper, outputs={"c": _product}, name="llama_linear")
gemm_swiglu = dsl.torch.op(gemm_hopper_swiglu,
                           outputs={"out": lambda a, b_t: a.new_empty(a.shape[0], b_t.shape[0] // 2)},
                           name="llama_linear_swiglu")
# The kernels write partials and tickets too: the schema marks them mutated, Tensor(a!).
gemm_small = dsl.torch.op(gemm_small_m, outputs={"c": _product}, name="llama_linear_small_m")
attention = dsl.torch.op(attention_hopper, outputs={"o": _rows_by_head}, name="llama_attention")
decode_attention = dsl.torch.op(attention_decode, outputs={"o": "q", "ws": _decode_workspace},
                                name="llama_attention_decode")


def linear(x: Any, weight: Any) -> Any:
    """x @ weight.T by gemm_hopper (prefill's projections), with the widest output tile that
    divides N; a few rows take 64-wide tiles, so that enough tiles stream the weight through
    every SM (the layer's decode step uses `small_m_linear` instead)."""
    n = weight.shape[0]
    bn = 64 if x.shape[0] <= 64 else next(b for b in (256, 128, 64) if n % b == 0)
    return gemm(x, weight, BN=bn)


def small_m_linear(x: Any, weight: Any, plan: Plan, partials: Any, tickets: Any) -> Any:
    """x @ weight.T as `plan` says (decode's projections): gemm_small_m with the caller's split-K
    workspace (zero tickets in, zero tickets out), or gemm_hopper where the plan picked it."""
    if plan.variant == "hopper":
        return gemm(x, weight, BN=plan.BN)
    return gemm_small(x, weight, partials, tickets, plan.splits, MP=plan.MP, CONSUMERS=plan.CONSUMERS,
                      STAGES=plan.STAGES)


# --- the layers ---------------------------------------------------------------------------------

def make_weights(config: LlamaConfig, device: Any = "cpu", seed: int = 0) -> dict[str, Any]:
    """Random bf16 weights at the scale of a trained layer's (activations stay near unit size)."""
    c = config
    gen = torch.Generator().manual_seed(seed)

    def matrix(rows: int, cols: int) -> Any:
        return (torch.randn(rows, cols, generator=gen) / math.sqrt(cols)).to(device, torch.bfloat16)

    def norm() -> Any:
        return (1.0 + 0.1 * torch.randn(c.hidden, generator=gen)).to(device, torch.bfloat16)

    return {"attn_norm": norm(), "w_qkv": matrix((c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden),
            "w_o": matrix(c.hidden, c.heads * c.head_dim), "mlp_norm": norm(),
            "w_gate_up": matrix(2 * c.intermediate, c.hidden), "w_down": matrix(c.hidden, c.intermediate)}


def rope_tables(config: LlamaConfig, device: Any = "cpu") -> tuple[Any, Any]:
    """cos and sin of position * theta^(-2i / D), [max_positions, D / 2] f32 (angles in f64)."""
    d = config.head_dim
    inv_freq = config.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(config.max_positions, dtype=torch.float64), inv_freq)
    return angles.cos().float().to(device), angles.sin().float().to(device)


class _Layer(_Module):
    """The weights, RoPE tables and KV cache both layers hold (the same tensors may be shared)."""

    attn_norm: Any
    w_qkv: Any
    w_o: Any
    mlp_norm: Any
    w_gate_up: Any
    w_down: Any
    cos: Any
    sin: Any
    k_cache: Any
    v_cache: Any

    def __init__(self, config: LlamaConfig, weights: dict[str, Any], rope: tuple[Any, Any]):
        super().__init__()
        self.config = config
        for name, value in weights.items():
            setattr(self, name, torch.nn.Parameter(value, requires_grad=False))
        self.register_buffer("cos", rope[0], persistent=False)
        self.register_buffer("sin", rope[1], persistent=False)
        self.register_buffer("k_cache", None, persistent=False)  # attach_cache gives them
        self.register_buffer("v_cache", None, persistent=False)

    def attach_cache(self, k_cache: Any, v_cache: Any) -> None:
        """The KV cache the decode step reads and writes, [B, HKV, L_max, D] each: buffers,
        marked static, so that a compiled step's CUDA graphs update them in place, where they are."""
        for cache in (k_cache, v_cache):
            torch._dynamo.mark_static_address(cache)
        self.k_cache, self.v_cache = k_cache, v_cache

    def forward(self, x: Any) -> Any:
        return self.prefill(x)

    def prefill(self, x: Any) -> Any:
        """One sequence [S, hidden] -> [S, hidden], causal attention over its S positions."""
        raise NotImplementedError

    def decode(self, x: Any, pos: int) -> Any:
        """One token per sequence, [B, hidden] at position `pos`: k and v go into the cache at
        `pos`, and each sequence attends to its positions [0, pos]."""
        raise NotImplementedError


class KdslLlamaLayer(_Layer):
    """The decoder layer of kdsl kernels (see the module docstring). Not for concurrent decode
    steps: they share the split-K workspace."""

    decode_partials: Any
    decode_tickets: Any

    def __init__(self, config: LlamaConfig, weights: dict[str, Any], rope: tuple[Any, Any]):
        # the gate / up weight's rows in alternating runs of eight, as the fused GEMM reads them
        super().__init__(config, {**weights, "w_gate_up": interleave_gate_up(weights["w_gate_up"])}, rope)
        self.decode_batch: int | None = None  # what decode_plans are for
        self.decode_plans: dict[str, Plan] = {}  # weight name -> its decode GEMM's plan
        self.register_buffer("decode_partials", None, persistent=False)  # plan_decode gives them
        self.register_buffer("decode_tickets", None, persistent=False)

    def attach_cache(self, k_cache: Any, v_cache: Any) -> None:
        """As `_Layer.attach_cache`, and the decode GEMMs planned for the cache's batch."""
        super().attach_cache(k_cache, v_cache)
        self.plan_decode(k_cache.shape[0])

    def plan_decode(self, batch: int, sm_count: int | None = None,
                    splits: Mapping[str, int] | None = None) -> dict[str, Plan]:
        """Plans the four decode projections for `batch` rows (the weights' GPU's SM count, or
        `sm_count`; `splits` forces a projection's K splits, as tests do at shapes too small to
        split) and sizes the workspace they share: allocated, zeroed, only when the present one
        is too small or on another device (then grown to fit every batch planned before), so a
        compiled step's static buffers stay where they are. Call it outside torch.compile: it
        sets module state; a step compiled for another batch recompiles (new plans, maybe new
        buffers)."""
        device = self.w_o.device
        sm_count = sm_count_of(self.w_o) if sm_count is None else sm_count
        plans: dict[str, Plan] = {}
        partials, tickets = 4, 1  # a kernel without split-K still takes (and ignores) both
        for name in PROJECTIONS:
            n, k = getattr(self, name).shape
            forced = (splits or {}).get(name)
            plan = plan_for(batch, n, k, sm_count) if forced is None else small_m_plan(batch, n, k, sm_count,
                                                                                        splits=forced)
            plans[name] = plan
            need = plan.workspace_size(batch, n, k)
            partials, tickets = max(partials, need[0]), max(tickets, need[1])
        ws = self.decode_partials, self.decode_tickets
        if ws[0] is None or ws[0].device != device or ws[0].shape[0] < partials or ws[1].shape[0] < tickets:
            if ws[0] is not None and ws[0].device == device:  # grown, never shrunk: earlier batches fit too
                partials, tickets = max(partials, ws[0].shape[0]), max(tickets, ws[1].shape[0])
            self.decode_partials = torch.zeros(partials, dtype=torch.float32, device=device)
            self.decode_tickets = torch.zeros(tickets, dtype=torch.int32, device=device)  # the kernel's start
            for buffer in (self.decode_partials, self.decode_tickets):
                torch._dynamo.mark_static_address(buffer)  # mutated in place under CUDA graphs, as the caches
        self.decode_batch, self.decode_plans = batch, plans
        return plans

    def prefill(self, x: Any) -> Any:
        c, S = self.config, x.shape[0]
        y = rmsnorm(x, self.attn_norm, c.eps)
        qkv = linear(y, self.w_qkv).view(1, S, -1)
        q, k, v = rope_prefill(qkv, self.cos, self.sin, 0, HQ=c.heads, HKV=c.kv_heads, D=c.head_dim)
        o = attention(q.view(c.heads, S, c.head_dim), k.view(c.kv_heads, S, c.head_dim),
                      v.view(c.kv_heads, S, c.head_dim), D=c.head_dim, CAUSAL=True)
        return self._rest(x, o.transpose(0, 1).reshape(S, c.heads * c.head_dim), self._prefill_linear,
                          self._prefill_activations)

    def decode(self, x: Any, pos: int) -> Any:
        c, B = self.config, x.shape[0]
        if self.decode_batch != B:
            raise ValueError(f"decode of {B} sequences, but the GEMMs are planned for {self.decode_batch}: "
                             "attach_cache (or plan_decode) for this batch first")
        y = rmsnorm(x, self.attn_norm, c.eps)
        qkv = self._decode_linear(y, "w_qkv").view(B, 1, -1)
        q = rope_decode(qkv, self.cos, self.sin, self.k_cache, self.v_cache, pos, HQ=c.heads, HKV=c.kv_heads,
                        D=c.head_dim)
        o, _ws = decode_attention(q.view(B, c.heads, c.head_dim), self.k_cache, self.v_cache, pos + 1,
                                  D=c.head_dim, GROUP=c.heads // c.kv_heads)
        return self._rest(x, o.view(B, c.heads * c.head_dim), self._decode_linear,
                          lambda y: swiglu(self._decode_linear(y, "w_gate_up")))

    def _prefill_linear(self, x: Any, name: str) -> Any:
        return linear(x, getattr(self, name))

    def _decode_linear(self, x: Any, name: str) -> Any:
        return small_m_linear(x, getattr(self, name), self.decode_plans[name], self.decode_partials,
                              self.decode_tickets)

    def _prefill_activations(self, y: Any) -> Any:
        """silu(gate) * up of prefill's normed rows: the gate / up GEMM and its activation in one
        kernel (gemm_hopper_swiglu over the interleaved weight)."""
        return gemm_swiglu(y, self.w_gate_up, BN=256 if self.w_gate_up.shape[0] % 256 == 0 else 128)

    def _rest(self, x: Any, o: Any, project: Callable[[Any, str], Any], activations: Callable[[Any], Any]) -> Any:
        """The output projection, the residual and the MLP, from attention's rows `o`;
        `project(rows, weight name)` is the path's GEMM, `activations(rows)` its silu(gate) * up."""
        y, h = add_rmsnorm(x, project(o, "w_o"), self.mlp_norm, self.config.eps)
        return add(h, project(activations(y), "w_down"))


def rope_torch(x: Any, cos: Any, sin: Any) -> Any:
    """Rotate-half RoPE of x [..., T, D] with cos / sin [T, D / 2], in f32, rounded once."""
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(x.dtype)


class TorchLlamaLayer(_Layer):
    """The same layer in plain PyTorch: the reference, and the peer under `torch.compile`."""

    def prefill(self, x: Any) -> Any:
        c, S = self.config, x.shape[0]
        y = F.rms_norm(x, (c.hidden,), self.attn_norm, c.eps)
        qkv = F.linear(y, self.w_qkv).view(S, c.heads + 2 * c.kv_heads, c.head_dim).transpose(0, 1).unsqueeze(0)
        q, k, v = qkv.split([c.heads, c.kv_heads, c.kv_heads], dim=1)
        q, k = rope_torch(q, self.cos[:S], self.sin[:S]), rope_torch(k, self.cos[:S], self.sin[:S])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self._rest(x, o[0].transpose(0, 1).reshape(S, c.heads * c.head_dim))

    def decode(self, x: Any, pos: int) -> Any:
        c, B = self.config, x.shape[0]
        y = F.rms_norm(x, (c.hidden,), self.attn_norm, c.eps)
        qkv = F.linear(y, self.w_qkv).view(B, c.heads + 2 * c.kv_heads, 1, c.head_dim)
        q, k, v = qkv.split([c.heads, c.kv_heads, c.kv_heads], dim=1)
        cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
        q, k = rope_torch(q, cos, sin), rope_torch(k, cos, sin)
        self.k_cache[:, :, pos:pos + 1] = k
        self.v_cache[:, :, pos:pos + 1] = v
        o = F.scaled_dot_product_attention(q, self.k_cache[:, :, :pos + 1], self.v_cache[:, :, :pos + 1],
                                           enable_gqa=True)
        return self._rest(x, o.reshape(B, c.heads * c.head_dim))

    def _rest(self, x: Any, o: Any) -> Any:
        h = x + F.linear(o, self.w_o)
        gate, up = F.linear(F.rms_norm(h, (self.config.hidden,), self.mlp_norm, self.config.eps),
                            self.w_gate_up).chunk(2, dim=-1)
        return h + F.linear(F.silu(gate) * up, self.w_down)


def make_layers(config: LlamaConfig = LlamaConfig(), device: Any = "cpu",
                seed: int = 0) -> tuple[KdslLlamaLayer, TorchLlamaLayer]:
    """The kdsl layer and its twin over the same weights and RoPE tables."""
    weights, rope = make_weights(config, device, seed), rope_tables(config, device)
    return KdslLlamaLayer(config, weights, rope), TorchLlamaLayer(config, weights, rope)


if __name__ == "__main__":
    kdsl_layer, torch_layer = make_layers(device="cuda")  # on an H100 / H200: checks against the twin
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    out = torch.compile(kdsl_layer.prefill, fullgraph=True)(x)
    print("prefill S=4096 max error", (out.float() - torch_layer.prefill(x).float()).abs().max().item())
    caches = [torch.randn(32, 8, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    kdsl_layer.attach_cache(*caches)
    torch_layer.attach_cache(*(c.clone() for c in caches))
    x = torch.randn(32, 4096, device="cuda", dtype=torch.bfloat16)
    out = torch.compile(kdsl_layer.decode, fullgraph=True)(x, 4095)
    print("decode B=32 KV 4096 max error", (out.float() - torch_layer.decode(x, 4095).float()).abs().max().item())
