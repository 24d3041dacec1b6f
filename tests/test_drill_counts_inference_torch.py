"""`drill counts` for inference against torch 2.13: a LLaMA-style decoder built from torch modules on the meta
device, its FLOPs counted by ``torch.utils.flop_counter`` for a decode step and a prefill, and the caches'
bytes as the bytes of the tensors that hold them (``Tensor.nbytes``).

torch is a test-only dependency: without it these tests skip, unless ATTN_TUTOR_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import os
import random

import pytest

from tutor.drills import inference
from tutor.drills.inference import PRESETS, Model


def require_torch():
    if os.environ.get("ATTN_TUTOR_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch", reason="PyTorch parity tests need torch==2.13.0 (test-only)")


torch = require_torch()
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

META = {"device": "meta", "dtype": torch.bfloat16}


class Decoder(nn.Module):
    """A LLaMA-style decoder (pre-RMSNorm, grouped-query attention, SwiGLU, an untied output head) of ``m``'s
    sizes; ``forward(x, cached)`` takes the new tokens' embeddings and each layer's cached K and V."""

    def __init__(self, m: Model):
        super().__init__()
        D, H, Hkv, d, F = m.d_model, m.num_heads, m.num_kv_heads, m.head_dim, m.ffn_dim
        self.m = m
        self.embed = nn.Embedding(m.vocab_size, D, **META)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "norm1": nn.RMSNorm(D, **META), "q": nn.Linear(D, H * d, bias=False, **META),
            "k": nn.Linear(D, Hkv * d, bias=False, **META), "v": nn.Linear(D, Hkv * d, bias=False, **META),
            "o": nn.Linear(H * d, D, bias=False, **META), "norm2": nn.RMSNorm(D, **META),
            "gate": nn.Linear(D, F, bias=False, **META), "up": nn.Linear(D, F, bias=False, **META),
            "down": nn.Linear(F, D, bias=False, **META)}) for _ in range(m.num_layers))
        self.norm = nn.RMSNorm(D, **META)
        self.head = nn.Linear(D, m.vocab_size, bias=False, **META)

    def forward(self, x, cached):
        m = self.m
        H, Hkv, d = m.num_heads, m.num_kv_heads, m.head_dim
        B, T, _ = x.shape
        for layer, (k_cache, v_cache) in zip(self.layers, cached, strict=True):
            h = layer["norm1"](x)
            q = layer["q"](h).view(B, T, H, d).transpose(1, 2)
            k = torch.cat([k_cache, layer["k"](h).view(B, T, Hkv, d).transpose(1, 2)], dim=2)
            v = torch.cat([v_cache, layer["v"](h).view(B, T, Hkv, d).transpose(1, 2)], dim=2)
            k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
            weights = (q @ k.transpose(-2, -1) / d**0.5).softmax(dim=-1)  # every score, before any mask
            x = x + layer["o"]((weights @ v).transpose(1, 2).reshape(B, T, H * d))
            h = layer["norm2"](x)
            x = x + layer["down"](nn.functional.silu(layer["gate"](h)) * layer["up"](h))
        return self.head(self.norm(x))


def _cache(m: Model, B: int, L: int):
    shape = (B, m.num_kv_heads, L, m.head_dim)
    return [(torch.empty(shape, **META), torch.empty(shape, **META)) for _ in range(m.num_layers)]


def _flops(model: Decoder, B: int, T: int, cached: int) -> int:
    x = model.embed(torch.zeros(B, T, dtype=torch.long, device="meta"))
    with FlopCounterMode(display=False) as counter:
        model(x, _cache(model.m, B, cached))
    return counter.get_total_flops()


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "Mistral-7B-v0.1"])
def test_a_decode_steps_flops_are_torchs_count(name):
    m = inference.preset(name)
    model = Decoder(m)
    B, L = 2, 1024
    assert _flops(model, B, 1, L - 1) == B * inference.decode_flops(m, L)  # L tokens, the new one's included
    q = inference.decode_question(m, random.Random(0), "t", part="flops", B=B, L=L)
    assert q.answer * B == _flops(model, B, 1, L - 1)


def test_a_prefills_flops_are_torchs_count_with_every_score():
    m = PRESETS["llama-3.1-8b"]
    P = 512
    assert _flops(Decoder(m), 1, P, 0) == inference.prefill_flops(m, P)


def test_the_bytes_a_decode_step_reads_are_the_weights_and_the_caches_tensors():
    m = PRESETS["llama-3.1-8b"]
    model = Decoder(m)
    B, L = 4, 2048
    matrices = sum(p.nbytes for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("embed"))
    caches = sum(k.nbytes + v.nbytes for k, v in _cache(m, B, L))
    assert inference.decode_bytes(m, B, L) == matrices + caches
    q = inference.decode_question(m, random.Random(0), "t", part="bytes", B=B, L=L)
    assert q.answer == matrices + caches


def test_the_mla_cache_is_its_latent_and_rope_key_tensors():
    m = PRESETS["deepseek-v2"]
    B, L = 2, 4096
    latent = [torch.empty(B, L, m.kv_lora_rank, **META) for _ in range(m.num_layers)]
    rope_key = [torch.empty(B, L, 1, m.rope_head_dim, **META) for _ in range(m.num_layers)]  # one key for all heads
    q = inference.mla_question(m, random.Random(0), "t", B=B, L=L)
    assert q.answer == sum(t.nbytes for t in latent + rope_key)


def test_the_sliding_window_cache_is_its_rolling_buffers():
    m = PRESETS["mistral-7b-v0.1"]
    B, L, W = 3, 8192, 4096
    buffers = [torch.empty(B, m.num_kv_heads, W, m.head_dim, **META) for _ in range(2 * m.num_layers)]
    q = inference.window_question(m, random.Random(0), "t", B=B, L=L)
    assert q.config["sliding_window"] == W and q.answer == sum(b.nbytes for b in buffers)


@pytest.mark.parametrize(("bits", "group"), [(8, 32), (8, 128), (4, 64)])
def test_the_quantized_cache_is_its_values_and_scales(bits, group):
    """int8 values as int8; int4 values packed two to a uint8; one float16 scale per group."""
    m = PRESETS["llama-3.1-70b"]
    B, L = 2, 1024
    shape = (m.num_layers, 2, B, m.num_kv_heads, L, m.head_dim)
    values = torch.empty(shape, device="meta", dtype=torch.int8)
    if bits == 4:
        values = torch.empty((*shape[:-1], m.head_dim // 2), device="meta", dtype=torch.uint8)
    scales = torch.empty((*shape[:-1], m.head_dim // group), device="meta", dtype=torch.float16)
    q = inference.quant_question(m, random.Random(0), "t", B=B, L=L, bits=bits, group=group)
    assert q.answer == values.nbytes + scales.nbytes


def test_paged_blocks_are_the_chunks_of_a_tokens_tensor():
    m = PRESETS["llama-3.1-8b"]
    for n, b in [(175, 32), (4096, 16), (4097, 16), (1, 8)]:
        chunks = torch.arange(n).split(b)  # the last chunk partly full, as the last block
        q = inference.paged_question(m, random.Random(0), "t", part="blocks", block_size=b, tokens=n)
        assert q.answer == len(chunks)
        if n % b:
            q = inference.paged_question(m, random.Random(0), "t", part="waste", block_size=b, tokens=n)
            per_token = sum(k.nbytes + v.nbytes for k, v in _cache(m, 1, 1))
            assert q.answer == (b - len(chunks[-1])) * per_token
