"""The `gqa` kata: its reference against PyTorch's own grouped-query attention (torch 2.13), its hand cases
against the exact engine, every catalogued mistake visible on its cases and told apart from the others.
The reference solutions and the held-back buggy files run through the child-process runner in
test_kata_files_run.py (a file of its own: each run is a process, and a PyTorch one takes seconds to import).

torch is a test oracle here (CI has it): ``F.scaled_dot_product_attention(..., enable_gqa=True)``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tutor.base.messages import t
from tutor.katas import catalog, gqa
from tutor.katas.kata import Case

KATA = gqa.KATA
CASES = KATA.cases()
SLIPPED = [m for m in KATA.mistakes if m.judge is None]
F32 = {"rtol": 1e-4, "atol": 1e-5}  # float32's tolerance: a difference beyond it is a visible one


def same(a: tuple[np.ndarray, ...] | None, b: tuple[np.ndarray, ...] | None, **tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x, y, equal_nan=True, **tol) for x, y in zip(a, b, strict=True))


# --- the kata's record -------------------------------------------------------------------------------


def test_registered_in_the_catalogue_in_order():
    assert catalog.get("gqa") is KATA
    assert catalog.IDS.index("gqa") < catalog.IDS.index("kv-cache")


def test_cases_cover_what_the_issue_asks():
    generated = [c for c in CASES if not c.hand]
    assert {c.dtype for c in generated} == {"float32", "float64"}
    assert all(c.sizes["B"] > 1 and c.sizes["H"] >= 2 and c.sizes["d_k"] >= 2 for c in generated)
    assert any(c.sizes["G"] == 1 for c in generated) and any(1 < c.sizes["G"] < c.sizes["H"] for c in generated)
    assert any(c.sizes["H"] == 6 and c.sizes["G"] == 3 for c in generated)  # tile ≠ repeat_interleave
    assert any(c.inputs["is_causal"] for c in generated) and any(not c.inputs["is_causal"] for c in generated)
    assert any(c.sizes["d_k"] != c.sizes["d_v"] for c in generated)
    assert {c.id for c in CASES if c.hand} == {"hand-gqa", "hand-mqa"}
    for c in generated:  # entries rounded to 3 decimals; weights far from one-hot in every head
        assert all(np.array_equal(c.inputs[n], c.inputs[n].round(3)) for n in ("q", "k", "v"))
        weights = c.expected[1]
        assert weights[..., -1, :].max() < 0.95


def test_every_mistake_has_a_message():
    for m in KATA.mistakes:
        assert t(f"code.mistake.{m.key}", **m.fields)


# --- (a) the reference is PyTorch's grouped-query attention ----------------------------------------


def torch_gqa(case: Case) -> tuple[np.ndarray, np.ndarray]:
    q, k, v = (torch.tensor(case.inputs[n], dtype=torch.float64) for n in ("q", "k", "v"))
    causal = bool(case.inputs["is_causal"])
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    group = q.shape[1] // k.shape[1]
    scores = q @ k.repeat_interleave(group, dim=1).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        L = q.shape[2]
        scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    return out.numpy(), torch.softmax(scores, dim=-1).numpy()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_is_torch_sdpa_with_enable_gqa(case):
    assert same(KATA.reference(case.inputs, frozenset()), torch_gqa(case), rtol=1e-12, atol=1e-12)


def test_enable_gqa_is_repeat_interleave_not_tile():
    """What the kata pins: query head h reads K/V head h // (H // G), as torch 2.13 does."""
    case = next(c for c in CASES if c.sizes["H"] == 6 and c.sizes["G"] == 3)
    q, k, v = (torch.tensor(case.inputs[n], dtype=torch.float64) for n in ("q", "k", "v"))
    causal = bool(case.inputs["is_causal"])
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    interleaved = F.scaled_dot_product_attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1),
                                                 is_causal=causal)
    tiled = F.scaled_dot_product_attention(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1), is_causal=causal)
    assert torch.allclose(out, interleaved, rtol=0, atol=1e-14)
    assert not torch.allclose(out, tiled, rtol=1e-3, atol=1e-3)
    assert np.allclose(gqa.reference(case.inputs, frozenset({"kv_tile_order"}))[0], tiled.numpy(), rtol=1e-12)


# --- (b) the hand cases: the exact engine agrees with the reference ------------------------------------


@pytest.mark.parametrize("case", [c for c in CASES if c.hand], ids=lambda c: c.id)
def test_hand_cases_equal_the_reference(case):
    assert same(case.expected, KATA.reference(case.inputs, frozenset()), rtol=1e-12, atol=1e-12)


def test_hand_case_k_comes_from_the_kv_heads():
    """The hand GQA case's K, V are the exercise's two K/V heads (x·W_K of each), in their order."""
    from tutor.katas import hand

    ex = hand.exercise("gqa-four-heads-2x4")
    case = next(c for c in CASES if c.id == "hand-gqa")
    x = hand.array(ex.x)
    assert ex.kv_heads is not None
    for g, kv in enumerate(ex.kv_heads):
        assert np.array_equal(case.inputs["k"][0, g], x @ hand.array(kv.w_k))
        assert np.array_equal(case.inputs["v"][0, g], x @ hand.array(kv.w_v))


# --- (c) every mistake changes some case, and the mistakes are told apart --------------------------------


@pytest.mark.parametrize("mistake", SLIPPED, ids=lambda m: "+".join(sorted(m.slips)))
def test_every_mistake_is_visible(mistake):
    seen = [c.id for c in CASES if not same(KATA.reference(c.inputs, mistake.slips), c.expected, **F32)]
    assert seen, f"{mistake.key} changes no case"


def test_mistakes_are_told_apart():
    """Every two catalogued mistakes give different outputs on some case (none is indistinguishable: the two
    ways to tile, np.tile and K/V head h % G, are one catalogued mistake, kv_tile_order)."""
    for a, b in itertools.combinations(SLIPPED, 2):
        assert any(not same(KATA.reference(c.inputs, a.slips), KATA.reference(c.inputs, b.slips), **F32)
                   for c in CASES), (a.slips, b.slips)


def test_weights_per_kv_head_is_named_by_shape():
    judge = next(m.judge for m in KATA.mistakes if m.key == "weights_per_kv_head")
    assert judge is not None
    for c in CASES:
        out, weights = c.expected
        s = c.sizes
        per_kv = weights.reshape(s["B"], s["G"], s["H"] // s["G"], s["L"], s["L"]).mean(axis=2)
        assert judge(c, (out, per_kv), {})
        assert not judge(c, (out, weights), {})
        assert not judge(c, (out,), {})


def test_tile_and_modulo_are_the_same_numbers():
    for c in CASES:
        H, G = c.sizes["H"], c.sizes["G"]
        modulo = c.inputs["k"][:, [h % G for h in range(H)]]
        assert np.array_equal(gqa.expand_kv(c.inputs["k"], H, frozenset({"kv_tile_order"})), modulo)
