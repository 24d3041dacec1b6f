"""`drill masks` against torch 2.13: every mask it asks, in every convention, is what torch's APIs take for
that scenario, and every fact it states about a fully masked row or the -1e9 idiom is what torch does.

torch is a test-only dependency: without it these tests skip, unless ATTN_TUTOR_REQUIRE_TORCH=1.
"""

from __future__ import annotations

import math
import random

import pytest

from tutor.drills import masks

from .oracle import require_torch

torch = require_torch()
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

E, H = 8, 2  # model width and heads of the layers the scenarios run through


def scenarios(n: int = 60) -> list[masks.Scenario]:
    rng = random.Random(0)
    return [masks.random_scenario(rng) for _ in range(n)]


def torch_allowed(s: masks.Scenario) -> torch.Tensor:
    """[B, L_q, L_k], True = may attend, built with torch's own causal biases and the key padding mask."""
    if s.causal == "none":
        causal = torch.ones(s.L_q, s.L_k, dtype=torch.bool)
    else:
        bias = (causal_upper_left if s.causal == "top_left" else causal_lower_right)(s.L_q, s.L_k)
        causal = bias._materialize()
    kpm = torch.tensor(s.key_padding_mask())
    return causal[None] & ~kpm[:, None, :]


@pytest.mark.parametrize("s", scenarios(), ids=lambda s: f"{s.kind}-{s.L_q}x{s.L_k}-{s.lengths}")
def test_the_mask_asked_is_torchs_for_the_scenario(s):
    allowed = torch_allowed(s)
    for b in range(s.B):
        assert allowed[b].tolist() == [list(row) for row in s.allowed(b)]


def _qkv(s: masks.Scenario, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(s.B, 1, s.L_q, 4, generator=g, dtype=torch.float64)
    k = torch.randn(s.B, 1, s.L_k, 4, generator=g, dtype=torch.float64)
    v = torch.randn(s.B, 1, s.L_k, 4, generator=g, dtype=torch.float64)
    return q, k, v


def _reference(q, k, v, allowed):
    w = (q @ k.transpose(-2, -1) / 2).masked_fill(~allowed, float("-inf")).softmax(-1)
    return w @ v


@pytest.mark.parametrize("s", scenarios(30), ids=lambda s: f"{s.kind}-{s.L_q}x{s.L_k}-{s.lengths}")
def test_every_convention_gives_the_same_attention(s):
    """SDPA with the boolean answer, SDPA with the additive answer, nn.MultiheadAttention with its
    boolean answer and with the key_padding_mask answer: the same rows wherever a row keeps a key."""
    q, k, v = _qkv(s)
    b = s.batch
    rows = [i for i in range(s.L_q) if i not in s.fully_masked()]
    allowed = torch.tensor(s.allowed())
    expected = _reference(q[b], k[b], v[b], allowed)[0, rows]
    as_bool = torch.tensor(masks.as_convention(s.allowed(), "sdpa_bool")).bool()
    as_additive = torch.tensor(masks.as_convention(s.allowed(), "additive"), dtype=torch.float64)
    for mask in (as_bool, as_additive):
        got = F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1], v[b:b + 1], attn_mask=mask)[0, 0, rows]
        assert torch.allclose(got, expected)
    mha = nn.MultiheadAttention(4, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(4).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(4))
    blocked = torch.tensor(masks.as_convention(s.allowed(), "mha_bool")).bool()
    out, _ = mha(q[b:b + 1, 0], k[b:b + 1, 0], v[b:b + 1, 0], attn_mask=blocked)
    assert torch.allclose(out[0, rows], expected)
    if s.padded:  # the key_padding_mask answer with the causal rule as attn_mask: the same
        kpm = torch.tensor(s.key_padding_mask())
        causal = ~torch.tensor(s.causal_allowed())
        out, _ = mha(q[:, 0], k[:, 0], v[:, 0], attn_mask=causal, key_padding_mask=kpm)
        assert torch.allclose(out[b, rows], expected)


# --- the facts ----------------------------------------------------------------------------------


def fully_masked_scenario() -> masks.Scenario:
    """Left padding with a causal mask: the first query rows see only padding keys."""
    return masks.Scenario("left_padding", 2, 4, 4, "top_left", (4, 2), True, 1)


def outcome_of(fact_id: str) -> str:
    """What torch gives in the fact's setting, classified: zeros, nan, bias, mean_v, error or neg_inf."""
    s = fully_masked_scenario()
    row = s.fully_masked()[0]
    torch.manual_seed(0)
    if fact_id in ("sdpa_bool", "sdpa_additive", "manual_inf", "manual_1e9"):
        q, k, v = _qkv(s)
        q, k, v = q[1:2], k[1:2], v[1:2]
        allowed = torch.tensor(s.allowed())
        if fact_id == "sdpa_bool":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        elif fact_id == "sdpa_additive":
            add = torch.tensor(masks.as_convention(s.allowed(), "additive"), dtype=torch.float64)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=add)
        else:
            fill = float("-inf") if fact_id == "manual_inf" else -1e9
            q, k, v = (t.float() for t in (q, k, v)) if fact_id == "manual_1e9" else (q, k, v)
            out = (q @ k.transpose(-2, -1) / 2).masked_fill(~allowed, fill).softmax(-1) @ v
        return _classify(out[0, 0, row], v[0, 0], None)
    if fact_id.startswith("mha"):
        mha = nn.MultiheadAttention(E, H, batch_first=True)
        with torch.no_grad():
            mha.out_proj.bias.copy_(torch.arange(1.0, E + 1))
        x = torch.randn(s.B, s.L_q, E)
        kpm, causal = torch.tensor(s.key_padding_mask()), ~torch.tensor(s.causal_allowed())
        if fact_id == "mha_need_weights":
            out, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm, need_weights=True)
        elif fact_id == "mha_train_no_weights":
            mha.train()
            out, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm, need_weights=False)
        else:
            assert torch.backends.mha.get_fastpath_enabled()
            mha.eval()
            with torch.no_grad():
                out, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm, need_weights=False)
        return _classify(out[1, row], None, mha.out_proj.bias)
    if fact_id == "f16_masked_fill":
        try:
            torch.zeros(2, 3, dtype=torch.float16).masked_fill(torch.tensor([[True, False, True]] * 2), -1e9)
        except RuntimeError as err:
            assert "without overflow" in str(err)
            return "error"
        return "no error"
    if fact_id == "f16_mask_tensor":
        mask = torch.zeros(2, 3, dtype=torch.float16)
        mask[torch.tensor([[True, False, True]] * 2)] = -1e9
        return "neg_inf" if mask[0, 0].item() == float("-inf") else str(mask[0, 0].item())
    if fact_id == "f32_fully_masked":
        scores = torch.randn(3, 5)
        w = scores.masked_fill(torch.ones(3, 5, dtype=torch.bool), -1e9).softmax(-1)
        return "mean_v" if torch.allclose(w, torch.full((3, 5), 0.2)) else "not uniform"
    if fact_id == "finfo_min_sum":
        results = set()
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            m = torch.full((2,), torch.finfo(dtype).min, dtype=dtype)
            results.add("neg_inf" if (m + m)[0].item() == float("-inf") else "finite")
        (result,) = results
        return result
    raise KeyError(fact_id)


def _classify(row, v, bias) -> str:
    if torch.isnan(row).all():
        return "nan"
    if torch.equal(row, torch.zeros_like(row)):
        return "zeros"
    if bias is not None and torch.allclose(row, bias.detach()):
        return "bias"
    if v is not None and torch.allclose(row.double(), v.double().mean(0), atol=1e-6):
        return "mean_v"
    return f"something else: {row.tolist()}"


@pytest.mark.parametrize("fact", masks.FACTS, ids=lambda f: f.id)
def test_every_fact_is_what_torch_does(fact):
    assert outcome_of(fact.id) == fact.result


def test_the_fast_path_fact_holds_for_every_fully_masked_scenario_the_drill_makes():
    """Not only for the scenario above: every left-padded scenario of the drill, in every fully masked row."""
    for s in scenarios(80):
        if not s.fully_masked():
            continue
        mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
        x = torch.randn(s.B, s.L_q, E)
        with torch.no_grad():
            out, _ = mha(x, x, x, attn_mask=~torch.tensor(s.causal_allowed()),
                         key_padding_mask=torch.tensor(s.key_padding_mask()), need_weights=False)
        assert torch.isnan(out[s.batch, s.fully_masked()]).all()


def test_padded_queries_need_no_mask_of_their_own():
    """The query-padding question's claims, in torch (nn.MultiheadAttention, need_weights=True):
    key padding alone leaves every row of a right-padded causal batch finite; blocking the padded
    queries' rows as well makes them NaN; without the key padding mask, the real queries' outputs change
    when the padding is at the start (causal) or in a bidirectional layer."""
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    x = torch.randn(2, 4, E)
    right = masks.Scenario("causal_padding", 2, 4, 4, "top_left", (4, 2), False, 1)
    kpm, causal = torch.tensor(right.key_padding_mask()), ~torch.tensor(right.causal_allowed())
    keys_only, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm)
    assert torch.isfinite(keys_only).all()
    rows = torch.zeros(2, 4, 4, dtype=torch.bool)
    rows[1, 2:, :] = True  # the padded queries (positions 2 and 3) block every key
    blocked, _ = mha(x, x, x, attn_mask=(causal[None] | kpm[:, None, :] | rows).repeat_interleave(H, dim=0))
    assert torch.isnan(blocked[1, 2:]).all() and torch.isfinite(blocked[0]).all()
    bidirectional, _ = mha(x, x, x, key_padding_mask=kpm)
    unmasked, _ = mha(x, x, x)
    assert not torch.allclose(unmasked[1, :2], bidirectional[1, :2])  # real queries 0 and 1 saw the pads
    left = masks.Scenario("left_padding", 2, 4, 4, "top_left", (4, 2), True, 1)
    kpm, causal = torch.tensor(left.key_padding_mask()), ~torch.tensor(left.causal_allowed())
    masked, _ = mha(x, x, x, attn_mask=causal, key_padding_mask=kpm)
    causal_only, _ = mha(x, x, x, attn_mask=causal)
    assert not torch.allclose(causal_only[1, 2:], masked[1, 2:])  # real queries 2 and 3 saw the leading pads


def test_float16_cannot_hold_minus_1e9():
    assert torch.finfo(torch.float16).max == 65504
    assert math.isinf(torch.tensor(-1e9, dtype=torch.float16).item())
