"""The Llama decoder layer of kdsl operators (`examples/pytorch/llama_layer.py`) equals its plain
PyTorch twin over the same weights: on CPU tensors through the interpreter at tiny dimensions,
eagerly and under `torch.compile(fullgraph=True)` (`aot_eager`: one graph of kdsl operators), and
on the GPU at Llama-3-8B's (marked `gpu`).

The tiny layer keeps every kernel's rules: hidden 128 (a multiple of 8), 2 query heads over 1 K/V
head of dimension 64, MLP 256, so each prefill GEMM (gemm_hopper) has N a multiple of its tile
and K of 64, and prefill runs one causal 128-row attention block per head. Decode's projections
are gemm_small_m, which needs only K % 8 == 0, so the same sizes serve; with 2 or 4 K tiles its
planner picks one split, so a test forces 2 and 4 splits to run the partials and tickets, and
checks that the workspace buffers stay zeroed and in place (eager, aot_eager, Inductor on CPU).
Each small kernel is also checked on its own against the torch expression it replaces, where a
mistake is easier to read than in the layer's output. Comparisons allow bf16 rounding: both
layers round at different places (kdsl once per kernel from f32, torch after each op), so a few
bf16 ulps of the largest value, and a norm-wise relative error well under 1%.
"""

from __future__ import annotations

import pytest

CPU = dict(hidden=128, heads=2, kv_heads=1, head_dim=64, intermediate=256, max_positions=256)
S = 128  # prefill tokens
B, L_MAX, POS = 2, 256, 100  # decode: sequences, cache length, the new token's position


@pytest.fixture(scope="module")
def llama(torch):
    """examples/pytorch/llama_layer.py (its operators registered on import)."""
    import llama_layer

    return llama_layer


@pytest.fixture(scope="module")
def tiny(llama):
    """The kdsl layer and its twin at the tiny dimensions, on the CPU."""
    return llama.make_layers(llama.LlamaConfig(**CPU))


def assert_bf16_close(got, expected) -> None:
    """Within a few bf16 roundings: each element to 3% of the largest, the whole to 1% (norm)."""
    got, expected = got.float(), expected.float()
    scale = float(expected.abs().max())
    worst = float((got - expected).abs().max())
    relative = float((got - expected).norm() / expected.norm())
    assert worst <= 0.03 * scale and relative <= 1e-2, f"max error {worst} (largest value {scale}), norm {relative}"


def with_caches(torch, layers, batch: int, length: int, config) -> None:
    """The same random KV cache, a copy each, for every layer."""
    gen = torch.Generator().manual_seed(3)
    shape = (batch, config.kv_heads, length, config.head_dim)
    k, v = (torch.randn(shape, generator=gen).bfloat16() for _ in range(2))
    for layer in layers:
        layer.attach_cache(k.clone().to(layer.w_o.device), v.clone().to(layer.w_o.device))


# --- the small kernels, one by one --------------------------------------------------------------

def test_rmsnorm_and_the_fused_residual_norm_match_torch(torch, llama):
    F = torch.nn.functional
    x, r = torch.randn(37, 128).bfloat16(), torch.randn(37, 128).bfloat16()  # 37 rows: a partial last block
    w = (1 + 0.1 * torch.randn(128)).bfloat16()
    assert_bf16_close(llama.rmsnorm(x, w, 1e-5), F.rms_norm(x.float(), (128,), w.float(), 1e-5))
    y, h = llama.add_rmsnorm(x, r, w, 1e-5)
    assert torch.equal(h, x + r)  # the residual stream is torch's bf16 sum, bit for bit
    assert_bf16_close(y, F.rms_norm(h.float(), (128,), w.float(), 1e-5))


def test_swiglu_and_the_residual_add_match_torch(torch, llama):
    gate, up = torch.randn(5, 64).bfloat16(), torch.randn(5, 64).bfloat16()
    gate_up = torch.stack([gate.view(5, 8, 8), up.view(5, 8, 8)], dim=2).reshape(5, 128)  # eight of each in turn
    assert_bf16_close(llama.swiglu(gate_up), torch.nn.functional.silu(gate.float()) * up.float())
    a, b = torch.randn(5, 64).bfloat16(), torch.randn(5, 64).bfloat16()
    assert torch.equal(llama.add(a, b), a + b)


def test_prefill_rope_rotates_q_and_k_and_lays_heads_out(torch, llama, tiny):
    layer, _ = tiny
    c = layer.config
    heads = c.heads + 2 * c.kv_heads
    qkv = torch.randn(1, S, heads * c.head_dim).bfloat16()
    q, k, v = llama.rope_prefill(qkv, layer.cos, layer.sin, 0, HQ=c.heads, HKV=c.kv_heads, D=c.head_dim)
    split = qkv.view(S, heads, c.head_dim).transpose(0, 1).unsqueeze(0).split([c.heads, c.kv_heads, c.kv_heads], 1)
    cos, sin = layer.cos[:S], layer.sin[:S]
    assert_bf16_close(q, llama.rope_torch(split[0], cos, sin))
    assert_bf16_close(k, llama.rope_torch(split[1], cos, sin))
    assert torch.equal(v, split[2])  # v is only moved
    assert q.shape == (1, c.heads, S, c.head_dim) and k.shape == v.shape == (1, c.kv_heads, S, c.head_dim)


def test_decode_rope_writes_k_and_v_into_the_cache_at_pos_only(torch, llama, tiny):
    layer, twin = tiny
    c = layer.config
    with_caches(torch, (layer, twin), B, L_MAX, c)
    before_k, before_v = layer.k_cache.clone(), layer.v_cache.clone()
    qkv = torch.randn(B, 1, (c.heads + 2 * c.kv_heads) * c.head_dim).bfloat16()
    q = llama.rope_decode(qkv, layer.cos, layer.sin, layer.k_cache, layer.v_cache, POS, HQ=c.heads, HKV=c.kv_heads,
                          D=c.head_dim)
    split = qkv.view(B, -1, 1, c.head_dim).split([c.heads, c.kv_heads, c.kv_heads], 1)
    cos, sin = layer.cos[POS:POS + 1], layer.sin[POS:POS + 1]
    assert_bf16_close(q, llama.rope_torch(split[0], cos, sin))
    assert_bf16_close(layer.k_cache[:, :, POS:POS + 1], llama.rope_torch(split[1], cos, sin))
    assert torch.equal(layer.v_cache[:, :, POS:POS + 1], split[2])
    others = torch.ones(L_MAX, dtype=torch.bool)
    others[POS] = False
    assert torch.equal(layer.k_cache[:, :, others], before_k[:, :, others])
    assert torch.equal(layer.v_cache[:, :, others], before_v[:, :, others])


def test_positions_past_the_cache_are_refused_before_anything_runs(torch, llama, tiny):
    layer, _ = tiny
    c = layer.config
    k = v = torch.zeros(1, c.kv_heads, 8, c.head_dim).bfloat16()
    qkv = torch.zeros(1, 1, (c.heads + 2 * c.kv_heads) * c.head_dim).bfloat16()
    with pytest.raises(Exception, match="positions past the tables or cache"):
        llama.rope_decode(qkv, layer.cos, layer.sin, k, v, 8, HQ=c.heads, HKV=c.kv_heads, D=c.head_dim)


# --- the layer ----------------------------------------------------------------------------------

def compiled_once(torch, fn):
    """fn under torch.compile(fullgraph=True, backend="aot_eager"), and its backend's counter."""
    from torch._dynamo.testing import CompileCounterWithBackend

    backend = CompileCounterWithBackend("aot_eager")
    return torch.compile(fn, fullgraph=True, backend=backend), backend


def kdsl_targets(backend) -> list[str]:
    return [str(n.target) for g in backend.graphs for n in g.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("kdsl.")]


DECODE_OPS = ["kdsl.llama_rmsnorm", "kdsl.llama_linear_small_m", "kdsl.llama_rope_decode",
              "kdsl.llama_attention_decode", "kdsl.llama_linear_small_m", "kdsl.llama_add_rmsnorm",
              "kdsl.llama_linear_small_m", "kdsl.llama_swiglu", "kdsl.llama_linear_small_m", "kdsl.llama_add"]


def test_prefill_equals_the_torch_twin_eagerly_and_compiled_as_one_graph(torch, tiny):
    layer, twin = tiny
    x = torch.randn(S, layer.config.hidden, generator=torch.Generator().manual_seed(1)).bfloat16()
    expected = twin.prefill(x)
    eager = layer.prefill(x)
    assert_bf16_close(eager, expected)
    compiled, backend = compiled_once(torch, layer.prefill)
    assert torch.equal(compiled(x), eager)  # the same kernels on the same inputs
    assert backend.frame_count == 1
    assert kdsl_targets(backend) == ["kdsl.llama_rmsnorm", "kdsl.llama_linear", "kdsl.llama_rope_prefill",
                                     "kdsl.llama_attention", "kdsl.llama_linear", "kdsl.llama_add_rmsnorm",
                                     "kdsl.llama_linear_swiglu", "kdsl.llama_linear", "kdsl.llama_add"]


def test_decode_equals_the_torch_twin_eagerly_and_compiled_as_one_graph(torch, llama, tiny):
    layer, twin = tiny
    c = layer.config
    x = torch.randn(B, c.hidden, generator=torch.Generator().manual_seed(2)).bfloat16()
    with_caches(torch, (layer, twin), B, L_MAX, c)  # attach_cache plans the GEMMs for B rows
    assert layer.decode_batch == B
    assert [(p.variant, p.MP, p.splits) for p in layer.decode_plans.values()] == [("small_m", 8, 1)] * 4
    expected = twin.decode(x, POS)
    eager = layer.decode(x, POS)
    assert_bf16_close(eager, expected)
    assert_bf16_close(layer.k_cache, twin.k_cache)
    assert torch.equal(layer.v_cache, twin.v_cache)
    compiled, backend = compiled_once(torch, layer.decode)
    assert torch.equal(compiled(x, POS), eager)  # writing the same k and v at POS again changes nothing
    assert backend.frame_count == 1
    assert kdsl_targets(backend) == DECODE_OPS


def test_a_compiled_decode_loop_takes_every_position_in_one_symbolic_graph(torch, llama, tiny):
    """A decode loop's position changes every step: torch specializes its first value, then
    traces it as a symbol; the launchers' arithmetic on it (the KV length `pos + 1`, its chunks)
    must hold for every later position without another compile (the number of chunks it splits
    the KV length into changes between the second and the third), and each step equal the twin's."""
    layer, twin = tiny
    c = layer.config
    with_caches(torch, (layer, twin), B, L_MAX, c)
    step, backend = compiled_once(torch, layer.decode)
    gen = torch.Generator().manual_seed(5)
    for pos in (POS, POS + 1, 2 * POS):  # the third's KV length takes two of attention_decode's chunks, not one
        x = torch.randn(B, c.hidden, generator=gen).bfloat16()
        expected = twin.decode(x, pos)
        assert_bf16_close(step(x, pos), expected)
        assert_bf16_close(layer.k_cache[:, :, pos], twin.k_cache[:, :, pos])
    assert backend.frame_count == 2  # the first position, then one graph for all the others
    assert kdsl_targets(backend) == DECODE_OPS * 2


def test_split_k_decode_keeps_its_workspace_zeroed_and_in_place_eagerly_and_compiled(torch, llama, tiny):
    """Partials and tickets are layer buffers every small-M call mutates: each call must leave the
    tickets at zero for the next, and compiling must neither break the graph nor copy them."""
    import re

    from torch._inductor.utils import run_and_get_code

    layer, twin = tiny
    c = layer.config
    x = torch.randn(B, c.hidden, generator=torch.Generator().manual_seed(4)).bfloat16()
    with_caches(torch, (layer, twin), B, L_MAX, c)
    plans = layer.plan_decode(B, splits={"w_qkv": 2, "w_gate_up": 2, "w_down": 4})  # w_o: one split
    assert [plans[n].splits for n in llama.PROJECTIONS] == [2, 1, 2, 4]
    partials, tickets = layer.decode_partials, layer.decode_tickets
    assert partials.shape[0] >= max(plans[n].workspace_size(B, *getattr(layer, n).shape)[0]
                                    for n in llama.PROJECTIONS)
    expected = twin.decode(x, POS)
    eager = layer.decode(x, POS)
    assert_bf16_close(eager, expected)
    assert not tickets.any()
    compiled, backend = compiled_once(torch, layer.decode)
    assert torch.equal(compiled(x, POS), eager)  # sums in split order: the same bits on a reused workspace
    assert backend.frame_count == 1 and kdsl_targets(backend) == DECODE_OPS
    out, code = run_and_get_code(torch.compile(layer.decode, fullgraph=True), x, POS)
    assert torch.equal(out, eager)
    assert layer.decode_partials is partials and layer.decode_tickets is tickets and not tickets.any()
    workspaces = re.findall(r"llama_linear_small_m\.default\(.*, (\w+), (\w+), \d+, \d+, CONSUMERS=", code[0])
    assert len(workspaces) == 4 and len(set(workspaces)) == 1, workspaces  # the buffers themselves, each call
    assert "copy_" not in code[0] and "clone" not in code[0]  # Inductor reinplaced every mutation


def test_decode_plans_at_llama_3_8b_dimensions(torch, llama):
    """The plans and workspace of a B = 32 step on an H200's 132 SMs, on meta tensors (no data):
    every projection the small-M kernel, split where its N tiles alone leave SMs idle; above
    128 rows gemm_hopper takes the projections whose tiles fill the GPU."""
    config = llama.LlamaConfig()
    shapes = {"attn_norm": (config.hidden,), "mlp_norm": (config.hidden,),
              "w_qkv": ((config.heads + 2 * config.kv_heads) * config.head_dim, config.hidden),
              "w_o": (config.hidden, config.heads * config.head_dim),
              "w_gate_up": (2 * config.intermediate, config.hidden), "w_down": (config.hidden, config.intermediate)}
    weights = {n: torch.empty(shape, dtype=torch.bfloat16, device="meta") for n, shape in shapes.items()}
    table = torch.empty(config.max_positions, config.head_dim // 2, device="meta")
    layer = llama.KdslLlamaLayer(config, weights, (table, table))
    plans = layer.plan_decode(32, sm_count=132)
    assert all(p.variant == "small_m" and p.MP == 32 for p in plans.values())
    assert plans["w_gate_up"].splits == 1 and all(plans[n].splits > 1 for n in ("w_qkv", "w_o", "w_down"))
    for name, plan in plans.items():
        partials, tickets = plan.workspace_size(32, *shapes[name])
        assert layer.decode_partials.shape[0] >= partials and layer.decode_tickets.shape[0] >= tickets
    before = layer.decode_partials
    big = layer.plan_decode(256, sm_count=132)
    assert big["w_qkv"].variant == big["w_gate_up"].variant == "hopper" and big["w_o"].variant == "small_m"
    assert layer.decode_partials.shape[0] >= before.shape[0]  # grown for both batches, never shrunk


def test_a_decode_batch_other_than_the_planned_one_is_refused(torch, tiny):
    layer, twin = tiny
    with_caches(torch, (layer, twin), B, L_MAX, layer.config)
    with pytest.raises(ValueError, match="planned for 2"):
        layer.decode(torch.zeros(B + 1, layer.config.hidden).bfloat16(), POS)


# --- on the GPU, at Llama-3-8B's dimensions -----------------------------------------------------

@pytest.fixture(scope="module")
def real(torch, llama):
    """Both layers at Llama-3-8B's dimensions on the GPU (skipped without one)."""
    from dsl.runtime import driver

    if not driver.available() or not torch.cuda.is_available():
        pytest.skip("no NVIDIA GPU here")
    return llama.make_layers(llama.LlamaConfig(), device="cuda")


@pytest.mark.gpu
def test_prefill_at_4096_tokens_equals_the_twin_eagerly_and_with_inductor(torch, real):
    layer, twin = real
    x = torch.randn(4096, layer.config.hidden, device="cuda").bfloat16()
    expected = twin.prefill(x)
    assert_bf16_close(layer.prefill(x), expected)
    assert_bf16_close(torch.compile(layer.prefill, fullgraph=True)(x), expected)


@pytest.mark.gpu
def test_decode_of_32_sequences_over_4096_positions_equals_the_twin(torch, real):
    layer, twin = real
    c = layer.config
    with_caches(torch, (layer, twin), 32, 4096, c)
    x = torch.randn(32, c.hidden, device="cuda").bfloat16()
    expected = twin.decode(x, 4095)  # the last position: attends to all 4096
    assert_bf16_close(layer.decode(x, 4095), expected)
    assert_bf16_close(layer.k_cache[:, :, 4095], twin.k_cache[:, :, 4095])
    step = torch.compile(layer.decode, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):  # a warm-up run, then a CUDA graph recorded and replayed: the cache stays in place
        torch.compiler.cudagraph_mark_step_begin()
        assert_bf16_close(step(x, 4095), expected)
    assert all(p.variant == "small_m" for p in layer.decode_plans.values())
    assert not layer.decode_tickets.any()  # every replay's last blocks put their tickets back
