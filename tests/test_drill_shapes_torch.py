"""`drill shapes` against torch 2.13: every shape it gives is the shape torch produces for that configuration,
and every wrong option of an operation question does, in torch, what its sentence says.

The forward is written here in torch (``nn.Linear`` projections, ``view``/``transpose``,
``repeat_interleave``, a boolean mask, softmax, ``weights @ v``, merge, ``W_O``) and run on the
meta device, so that configurations of any size cost nothing; the shapes are those torch's
operators produce.  Independently of that recipe, ``F.scaled_dot_product_attention``
(``enable_gqa=True``) must give ``head_outputs``' shape, and ``nn.MultiheadAttention`` the output's
and the per-head weights' shapes when the configuration is one it can express.

torch is a test-only dependency: without it these tests skip, unless ATTN_TUTOR_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from tutor.drills import shapes as drill
from tutor.numeric.trace import AttentionConfig, production_trace

from .oracle import require_torch

torch = require_torch()
import torch.nn.functional as F
from torch import nn

SEEDS = (0, 1, 7, 42, 2024)


def config_of(item: dict) -> AttentionConfig:
    """The configuration a JSON item of ``drill shapes --show-answers --format json`` carries."""
    return AttentionConfig(item["B"], item["L_q"], item["L_k"], item["d_model"], item["num_heads"], item["num_kv_heads"],
                           item["d_k"], item["d_v"], item["d_kv"], cross=item["attention"] == "cross",
                           fused=item["fused"], causal="causal" in item["mask"], padding="padding" in item["mask"])


def torch_points(c: AttentionConfig, device: str = "meta", dtype=torch.float32) -> dict[str, torch.Tensor]:
    """The production forward of ``c`` in torch: every named point's tensor."""
    B, Lq, Lk, D, H, Hkv, dk, dv = c.B, c.L_q, c.L_k, c.d_model, c.num_heads, c.num_kv_heads, c.d_k, c.d_v
    kw = {"device": device, "dtype": dtype}
    x = torch.randn(B, Lq, D, **kw)
    src = torch.randn(B, Lk, c.d_kv, **kw) if c.cross else x
    p: dict[str, torch.Tensor] = {"x": x}
    if c.fused:
        qkv = nn.Linear(D, H * dk + Hkv * dk + Hkv * dv, **kw)(x)
        q, k, v = qkv.split([H * dk, Hkv * dk, Hkv * dv], dim=-1)
    else:
        q = nn.Linear(D, H * dk, **kw)(x)
        k = nn.Linear(c.d_kv, Hkv * dk, **kw)(src)
        v = nn.Linear(c.d_kv, Hkv * dv, **kw)(src)
    p.update(q_proj=q, k_proj=k, v_proj=v)
    p["q_heads"] = q.view(B, Lq, H, dk).transpose(1, 2)
    p["k_heads"] = k.view(B, Lk, Hkv, dk).transpose(1, 2)
    p["v_heads"] = v.view(B, Lk, Hkv, dv).transpose(1, 2)
    keys, values = p["k_heads"], p["v_heads"]
    if Hkv < H:
        keys = p["k_repeated"] = keys.repeat_interleave(H // Hkv, dim=1)
        values = p["v_repeated"] = values.repeat_interleave(H // Hkv, dim=1)
    mask = None
    if c.padding:
        p["key_padding_mask"] = torch.zeros(B, Lk, dtype=torch.bool, device=device)
    if c.causal:
        mask = torch.ones(Lq, Lk, dtype=torch.bool, device=device).tril()
    if c.padding:
        pad = ~p["key_padding_mask"][:, None, None, :]
        mask = pad if mask is None else mask & pad
    if mask is not None:
        p["attn_mask"] = mask
    scores = p["q_heads"] @ keys.transpose(-2, -1) / math.sqrt(dk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    p["scores"] = scores
    p["weights"] = scores.softmax(dim=-1)
    p["head_outputs"] = p["weights"] @ values
    p["merged"] = p["head_outputs"].transpose(1, 2).reshape(B, Lq, H * dv)
    p["output"] = nn.Linear(H * dv, D, **kw)(p["merged"])
    sdpa = F.scaled_dot_product_attention(p["q_heads"], p["k_heads"], p["v_heads"], attn_mask=mask, enable_gqa=True)
    assert sdpa.shape == p["head_outputs"].shape  # torch's own attention agrees with the recipe above
    return p


@pytest.mark.parametrize("seed", SEEDS)
def test_every_shape_of_the_json_listing_is_torchs(cli, seed):
    """The issue's acceptance test: ``drill shapes --seed S --count 20 --show-answers --format json``."""
    code, out, err = cli("drill", "shapes", "--seed", seed, "--count", 20, "--show-answers", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["seed"] == seed and doc["count"] == 20 and len(doc["questions"]) == 20
    shape_items = [q for q in doc["questions"] if q["kind"] == "shape"]
    assert shape_items  # most items ask a shape
    for item in doc["questions"]:
        for name in ("B", "L_q", "L_k", "d_model", "num_heads", "num_kv_heads", "d_k", "d_v", "point"):
            assert name in item, name
        assert item["point"] in drill.ASKED
    for item in shape_items:
        points = torch_points(config_of(item))
        assert list(points[item["point"]].shape) == item["answer"], item


@pytest.mark.parametrize("seed", range(40))
def test_every_point_of_random_configurations_is_torchs(seed):
    """Every point of the trace (not only those asked), for configurations drawn as the drill draws them."""
    rng = random.Random(seed)
    c = drill.random_config(rng)
    points = torch_points(c)
    trace = production_trace(c)
    asked = [p for p in trace if p.name in drill.ASKED]
    assert {p.name for p in asked} == set(points), "the trace and the torch forward name the same points"
    for p in asked:
        assert tuple(points[p.name].shape) == p.shape, (c, p.name)


def test_the_layer_modules_of_torch_agree_where_they_apply():
    """nn.MultiheadAttention (multi-head, equal widths): its output and per-head weights have the trace's shapes."""
    for c in (AttentionConfig(2, 5, 7, 64, 8, 8, 8, 8, 48, cross=True, padding=True),
              AttentionConfig(3, 4, 4, 32, 4, 4, 8, 8, 32, causal=True)):
        trace = {p.name: p.shape for p in production_trace(c)}
        mha = nn.MultiheadAttention(c.d_model, c.num_heads, kdim=c.d_kv, vdim=c.d_kv, batch_first=True, device="meta")
        x = torch.empty(c.B, c.L_q, c.d_model, device="meta")
        kv = torch.empty(c.B, c.L_k, c.d_kv, device="meta") if c.cross else x
        out, weights = mha(x, kv, kv, average_attn_weights=False)
        assert tuple(out.shape) == trace["output"] and tuple(weights.shape) == trace["weights"]


# --- the operations, and what each wrong option does ---------------------------------------------


def _run(code: str, c: AttentionConfig, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Run one option's text (written by tutor/drills/shapes.py, not by a user) on real tensors."""
    env = {"math": math, **tensors, **c.sizes()}
    target, expression = code.split(" = ", 1)
    return eval(expression.replace("·", "*"), {"__builtins__": {}}, env)  # noqa: S307 - the module's own strings


@pytest.mark.parametrize("seed", range(60))
def test_every_wrong_option_does_what_its_sentence_says(seed):
    rng = random.Random(seed)
    c = drill.random_config(rng)
    small = AttentionConfig(min(c.B, 2), min(c.L_q, 5), min(c.L_k, 6) if c.cross else min(c.L_q, 5),
                            min(c.d_model, 32), c.num_heads, c.num_kv_heads, min(c.d_k, 4), min(c.d_v, 4),
                            min(c.d_kv, 24) if c.cross else min(c.d_model, 32), cross=c.cross, fused=c.fused)
    targets = drill.op_targets(small)
    if not targets:
        pytest.skip("no operation question for this configuration")
    torch.manual_seed(seed)
    forward = torch_points(small, device="cpu", dtype=torch.float64)
    for target in targets:
        tensors = dict(forward)
        if target == "weights":  # varied scores, so that every wrong normalisation shows
            tensors["scores"] = torch.randn_like(forward["scores"]) * 3
            tensors["weights"] = tensors["scores"].softmax(dim=-1)
        q = drill.op_question(small, target, random.Random(seed), "t")
        right = next(ch for ch in q.choices if ch.right)
        expected = _run(right.text, small, tensors)
        assert torch.allclose(expected, tensors[target]), (target, right.text)
        mistakes = {m.code: m for m in drill._mistakes(target, "k_repeated" if "k_repeated" in tensors else "k_heads")}
        for ch in q.choices:
            if ch.right:
                continue
            m = mistakes[ch.text]
            raises = m.claim == "raises" or (m.claim == "raises_if_lengths_differ" and small.L_q != small.L_k)
            try:
                got = _run(ch.text, small, tensors)
            except RuntimeError:
                assert raises, (target, ch.text)
                continue
            assert not raises, (target, ch.text)
            if m.claim == "shape":
                assert got.shape != expected.shape, (target, ch.text)
            elif m.claim == "values":
                assert got.shape == expected.shape and not torch.allclose(got, expected), (target, ch.text)
            else:
                assert got.shape != expected.shape or not torch.allclose(got, expected), (target, ch.text)


def test_gqa_pairs_query_heads_with_kv_heads_as_enable_gqa_does():
    """repeat_interleave (the trace's k_repeated) is SDPA's enable_gqa pairing; repeat is not."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 3, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    gqa = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    interleaved = F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
    tiled = F.scaled_dot_product_attention(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1))
    assert torch.allclose(gqa, interleaved) and not torch.allclose(gqa, tiled)
