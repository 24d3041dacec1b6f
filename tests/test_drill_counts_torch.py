"""`drill counts` against torch 2.13: parameters of real modules, FLOPs from torch's own counter, bytes of the
tensors a forward makes, bytes per element of each dtype.

torch is a test-only dependency: without it these tests skip, unless ATTN_TUTOR_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import math
import random

import pytest

from tutor.drills import counts

from .oracle import require_torch

torch = require_torch()
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


class GroupedAttention(nn.Module):
    """A grouped-query attention layer as LLMs build it from nn.Linear (Llama-style), for counting."""

    def __init__(self, layer: counts.Layer, device: str = "meta"):
        super().__init__()
        D, H, Hkv, dk, dv = layer.d_model, layer.num_heads, layer.num_kv_heads, layer.d_k, layer.d_v
        self.sizes = (H, Hkv, dk, dv)
        self.q = nn.Linear(D, H * dk, bias=layer.bias, device=device)
        self.k = nn.Linear(D, Hkv * dk, bias=layer.bias, device=device)
        self.v = nn.Linear(D, Hkv * dv, bias=layer.bias, device=device)
        self.o = nn.Linear(H * dv, D, bias=layer.bias, device=device)

    def forward(self, x):
        H, Hkv, dk, dv = self.sizes
        B, L, _ = x.shape
        q = self.q(x).view(B, L, H, dk).transpose(1, 2)
        k = self.k(x).view(B, L, Hkv, dk).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
        v = self.v(x).view(B, L, Hkv, dv).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
        self.weights = (q @ k.transpose(-2, -1) / math.sqrt(dk)).softmax(dim=-1)
        out = (self.weights @ v).transpose(1, 2).reshape(B, L, H * dv)
        return self.o(out)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("d_model", "heads"), [(512, 8), (768, 12), (4096, 32)])
def test_parameters_equal_nn_multiheadattention(bias, d_model, heads):
    mha = nn.MultiheadAttention(d_model, heads, bias=bias, device="meta")
    layer = counts.Layer(d_model, heads, heads, d_model // heads, d_model // heads, bias)
    assert sum(counts.parameters(layer).values()) == sum(p.numel() for p in mha.parameters())


@pytest.mark.parametrize("seed", range(12))
def test_parameters_equal_a_grouped_layer_built_from_linear(seed):
    layer = counts.random_layer(random.Random(seed), bias=seed % 2 == 0)
    module = GroupedAttention(layer)
    assert sum(counts.parameters(layer).values()) == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("seed", range(12))
def test_flops_equal_torchs_flop_counter(seed):
    """torch.utils.flop_counter counts 2 FLOPs per multiply-add of every matmul (nn.Linear's bias excluded)."""
    rng = random.Random(seed)
    layer = counts.random_layer(rng, bias=False)
    B, L = rng.choice((1, 2)), rng.choice((16, 128))
    module = GroupedAttention(layer)
    with FlopCounterMode(display=False) as counter:
        module(torch.empty(B, L, layer.d_model, device="meta"))
    assert sum(counts.forward_flops(layer, B, L, L).values()) == counter.get_total_flops()


def test_flops_of_each_part_equal_torchs_flop_counter():
    layer = counts.Layer(256, 8, 2, 32, 32, False)
    B, L = 2, 64
    module = GroupedAttention(layer)
    x = torch.empty(B, L, 256, device="meta")
    parts = counts.forward_flops(layer, B, L, L)
    for name, run in (("q_proj", lambda: module.q(x)), ("k_proj", lambda: module.k(x)), ("v_proj", lambda: module.v(x)),
                      ("output", lambda: module.o(torch.empty(B, L, 256, device="meta")))):
        with FlopCounterMode(display=False) as counter:
            run()
        assert parts[name] == counter.get_total_flops(), name
    q = torch.empty(B, 8, L, 32, device="meta")
    with FlopCounterMode(display=False) as counter:
        w = q @ q.transpose(-2, -1)
    assert parts["scores"] == counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        w @ q
    assert parts["head_outputs"] == counter.get_total_flops()


@pytest.mark.parametrize("dtype", sorted(counts.DTYPE_BYTES))
def test_bytes_per_element_are_torchs(dtype):
    assert torch.empty(0, dtype=getattr(torch, dtype)).element_size() == counts.DTYPE_BYTES[dtype]


@pytest.mark.parametrize("seed", range(8))
def test_the_weights_tensor_of_a_forward_has_the_bytes_counted(seed):
    rng = random.Random(seed)
    layer = counts.random_layer(rng, bias=False)
    B, L, dtype = rng.choice((1, 2)), rng.choice((16, 64)), rng.choice(("float32", "float16", "bfloat16"))
    module = GroupedAttention(layer).to(getattr(torch, dtype))
    module(torch.empty(B, L, layer.d_model, device="meta", dtype=getattr(torch, dtype)))
    w = module.weights
    assert w.numel() * w.element_size() == counts.weights_bytes(B, layer.num_heads, L, L, counts.DTYPE_BYTES[dtype])


@pytest.mark.parametrize("seed", range(8))
def test_a_kv_cache_of_real_tensors_has_the_bytes_counted(seed):
    """One K and one V tensor per layer, [B, num_kv_heads, L, d_k], as a decoder caches them."""
    rng = random.Random(seed)
    layer = counts.random_layer(rng)
    layers, B, L = rng.choice((2, 12, 32)), rng.choice((1, 4)), rng.choice((128, 4096))
    dtype = rng.choice(sorted(counts.DTYPE_BYTES))
    cache = [(torch.empty(B, layer.num_kv_heads, L, layer.d_k, dtype=getattr(torch, dtype), device="meta"),
              torch.empty(B, layer.num_kv_heads, L, layer.d_v, dtype=getattr(torch, dtype), device="meta"))
             for _ in range(layers)]
    total = sum(t.numel() * t.element_size() for kv in cache for t in kv)
    assert total == counts.kv_cache_bytes(layers, B, L, layer.num_kv_heads, layer.d_k, layer.d_v,
                                          counts.DTYPE_BYTES[dtype])


@pytest.mark.parametrize("seed", range(20))
def test_every_count_question_is_answered_by_torch(seed):
    """The questions themselves, whatever they ask: parameters and FLOPs from modules, bytes from tensors."""
    rng = random.Random(seed)
    for q in counts.questions(rng.randrange(1000), 4):
        c = q.config
        if q.topic == "params":
            layer = counts.Layer(c["d_model"], c["num_heads"], c["num_kv_heads"], c["d_k"], c["d_v"], c["bias"])
            assert q.answer == sum(p.numel() for p in GroupedAttention(layer).parameters())
        elif q.topic == "flops":
            layer = counts.Layer(c["d_model"], c["num_heads"], c["num_kv_heads"], c["d_k"], c["d_v"], False)
            module = GroupedAttention(layer)
            x = torch.empty(c["B"], c["L_q"], c["d_model"], device="meta")
            if c["part"] == "total":
                with FlopCounterMode(display=False) as counter:
                    module(x)
                assert q.answer == counter.get_total_flops()
            else:  # each part is checked against the counter above; here the question's sum of them
                chosen = {"projections": ("q_proj", "k_proj", "v_proj", "output"), "scores": ("scores",),
                          "head_outputs": ("head_outputs",), "output": ("output",)}[c["part"]]
                parts = counts.forward_flops(layer, c["B"], c["L_q"], c["L_k"])
                assert q.answer == sum(parts[k] for k in chosen)
        elif q.topic == "weights_memory":
            w = torch.empty(c["B"], c["num_heads"], c["L_q"], c["L_k"], dtype=getattr(torch, c["dtype"]), device="meta")
            assert q.answer == w.numel() * w.element_size()
        else:
            kv = torch.empty(c["B"], c["num_kv_heads"], c["L"], c["d_k"], dtype=getattr(torch, c["dtype"]), device="meta")
            assert q.answer == 2 * c["layers"] * kv.numel() * kv.element_size()


def test_an_int8_cache_is_asked_as_its_elements_and_its_scales_are_said():
    """Issue 20, D: 'how many bytes in int8' left out the quantization scales.  The question now asks for the
    elements alone and says so; its explanation gives the scales of one example scheme (a float16 scale per
    token and K/V head), which a per-token int8 quantization of real tensors stores, byte for byte."""
    q = next(q for s in range(200) for q in [counts.kv_question(random.Random(s), "x")] if q.config["dtype"] == "int8")
    c = q.config
    assert "Count the 1-byte elements only" in q.prompt and "scales" in q.prompt
    torch.manual_seed(0)
    B, H, L, d = c["B"], c["num_kv_heads"], 4, c["d_k"]  # L small: the bytes scale with it, the structure does not
    k = torch.randn(B, H, L, d)  # [B, num_kv_heads, L, d_k]
    scale = (k.abs().amax(-1, keepdim=True) / 127).to(torch.float16)  # [B, num_kv_heads, L, 1]: per token and head
    k8 = torch.round(k / scale.float()).clamp(-127, 127).to(torch.int8)  # [B, num_kv_heads, L, d_k]
    torch.testing.assert_close(k8.float() * scale.float(), k, atol=scale.float().max().item(), rtol=0)
    per_layer = 2 * (k8.numel() * k8.element_size() + scale.numel() * scale.element_size())  # K and V
    assert per_layer == counts.kv_cache_bytes(1, B, L, H, d, d, 1) + counts.kv_cache_bytes(1, B, L, H, 1, 1, 2)
    scales = counts.kv_cache_bytes(c["layers"], B, c["L"], H, 1, 1, 2)
    assert f"{scales:,} bytes" in q.explain[-1] and "2·layers·B·L·num_kv_heads·2" in q.explain[-1]
    assert q.answer == counts.kv_cache_bytes(c["layers"], B, c["L"], H, d, d, 1)  # the elements alone
