"""The `kv-cache` kata: its reference against PyTorch (torch 2.13: ``causal_lower_right`` on the grown cache,
and a full causal forward over all the tokens, whose last rows the step must give), its hand cases against the
exact engine, every catalogued mistake visible on its cases and told apart from the others.  The reference
solutions and the held-back buggy files run through the child-process runner in test_kata_files_run.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tutor.base.messages import t
from tutor.katas import catalog, hand, kv_cache
from tutor.katas.kata import Case

KATA = kv_cache.KATA
CASES = KATA.cases()
SLIPPED = [m for m in KATA.mistakes if m.judge is None]
F32 = {"rtol": 1e-4, "atol": 1e-5}  # float32's tolerance: a difference beyond it is a visible one


def same(a: tuple[np.ndarray, ...] | None, b: tuple[np.ndarray, ...] | None, **tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x, y, equal_nan=True, **tol) for x, y in zip(a, b, strict=True))


# --- the kata's record -------------------------------------------------------------------------------


def test_registered_in_the_catalogue():
    assert catalog.get("kv-cache") is KATA


def test_cases_cover_what_the_issue_asks():
    generated = [c for c in CASES if not c.hand]
    assert {c.dtype for c in generated} == {"float32", "float64"}
    assert all(c.sizes["B"] > 1 and c.sizes["H"] >= 2 and c.sizes["d_k"] >= 2 for c in generated)
    assert {c.sizes["T"] for c in generated} >= {1, 2, 3}
    assert any(c.sizes["P"] == 0 for c in generated) and any(c.sizes["T"] >= 2 and c.sizes["P"] > 0 for c in CASES)
    assert {c.id for c in CASES if c.hand} == {"hand-two-new", "hand-one-new"}
    for c in generated:
        assert all(np.array_equal(c.inputs[n], c.inputs[n].round(3)) for n in ("x_new", "w_q", "w_k", "w_v", "w_o"))


def test_every_mistake_has_a_message():
    for m in KATA.mistakes:
        assert t(f"code.mistake.{m.key}", **m.fields)


# --- (a) the reference is PyTorch's attention over the grown cache, and the full forward's last rows ----------


def lower_right(T: int, S: int) -> torch.Tensor:
    """True = may attend: query i sees keys j ≤ i + S − T (what torch's causal_lower_right materialises)."""
    return torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)


def torch_step(case: Case, mask: Callable[[int, int], Any] = lower_right) -> tuple[np.ndarray, ...]:
    i = {n: torch.tensor(v, dtype=torch.float64) for n, v in case.inputs.items() if isinstance(v, np.ndarray)}
    B, T, D = i["x_new"].shape
    H = case.inputs["num_heads"]
    P = i["k_cache"].shape[2]

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.view(B, -1, H, D // H).transpose(1, 2)

    q = split(F.linear(i["x_new"], i["w_q"]))
    k = torch.cat([i["k_cache"], split(F.linear(i["x_new"], i["w_k"]))], dim=2)
    v = torch.cat([i["v_cache"], split(F.linear(i["x_new"], i["w_v"]))], dim=2)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask(T, P + T))
    out = F.linear(context.transpose(1, 2).reshape(B, T, D), i["w_o"])
    return out.numpy(), k.numpy(), v.numpy()


def torch_full_forward(case: Case) -> np.ndarray:
    """A causal forward over all P + T tokens' inputs with torch's own multi-head module (no biases)."""
    x = torch.tensor(np.concatenate([case.inputs["past_x"], case.inputs["x_new"]], axis=1), dtype=torch.float64)
    D, H = x.shape[-1], case.inputs["num_heads"]
    mha = torch.nn.MultiheadAttention(D, H, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.tensor(np.vstack([case.inputs[w] for w in ("w_q", "w_k", "w_v")])))
        mha.out_proj.weight.copy_(torch.tensor(case.inputs["w_o"]))
        L = x.shape[1]
        out, _ = mha(x, x, x, attn_mask=torch.ones(L, L, dtype=torch.bool).triu(1), need_weights=False)
    return out.numpy()


def test_reference_is_torch_with_its_causal_lower_right_bias():
    """SDPA given torch's own causal_lower_right bias (imported here: it imports torch._dynamo, seconds of a test
    run) gives the reference's step on every case."""
    from torch.nn.attention.bias import causal_lower_right

    for c in CASES:
        assert same(KATA.reference(c.inputs, frozenset()), torch_step(c, causal_lower_right), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_is_torch_with_causal_lower_right(case):
    assert same(KATA.reference(case.inputs, frozenset()), torch_step(case), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_step_gives_the_full_forwards_last_rows(case):
    """out equals the last T rows of a causal forward over all P + T tokens; the caches are all their K, V."""
    T, H = case.sizes["T"], case.inputs["num_heads"]
    full = torch_full_forward(case)
    assert np.allclose(case.expected[0], full[:, -T:], rtol=1e-12, atol=1e-12)
    assert np.allclose(kv_cache.full_forward(case.inputs)[:, -T:], case.expected[0], rtol=1e-12, atol=1e-12)
    x = np.concatenate([case.inputs["past_x"], case.inputs["x_new"]], axis=1)
    B, L, D = x.shape
    for got, w in zip(case.expected[1:], ("w_k", "w_v"), strict=True):
        assert np.allclose(got, (x @ case.inputs[w].T).reshape(B, L, H, D // H).transpose(0, 2, 1, 3), rtol=1e-12)


# --- (b) the hand cases: the exact engine agrees with the reference ------------------------------------


@pytest.mark.parametrize("case", [c for c in CASES if c.hand], ids=lambda c: c.id)
def test_hand_cases_equal_the_reference(case):
    assert same(case.expected, KATA.reference(case.inputs, frozenset()), rtol=1e-12, atol=1e-12)


def test_hand_case_cache_is_the_exercises():
    """The exercise's cache rows are its past tokens' inputs projected (K = X_past·W_K), as the kata's cache is."""
    ex = hand.exercise("decode-two-tokens-alignment")
    case = next(c for c in CASES if c.id == "hand-two-new")
    assert ex.past_x is not None
    past = hand.array(ex.past_x)
    assert np.array_equal(case.inputs["k_cache"][0, 0], past @ case.inputs["w_k"].T)
    assert np.array_equal(case.inputs["v_cache"][0, 0], past @ case.inputs["w_v"].T)


# --- (c) every mistake changes some case, and the mistakes are told apart --------------------------------


@pytest.mark.parametrize("mistake", SLIPPED, ids=lambda m: "+".join(sorted(m.slips)))
def test_every_mistake_is_visible(mistake):
    seen = [c.id for c in CASES if not same(KATA.reference(c.inputs, mistake.slips), c.expected, **F32)]
    assert seen, f"{mistake.key} changes no case"


def test_mistakes_are_told_apart():
    """Every two catalogued mistakes give different outputs on some case where both run."""
    for a, b in itertools.combinations(SLIPPED, 2):
        assert any(not same(KATA.reference(c.inputs, a.slips), KATA.reference(c.inputs, b.slips), **F32)
                   for c in CASES), (a.slips, b.slips)


def test_alignment_and_heads_need_two_new_tokens():
    """Why the cases have T ≥ 2: with one new token no mask and the plain-reshape head split are right."""
    for c in CASES:
        if c.sizes["T"] == 1:
            for slips in ({"no_mask"}, {"heads_split_reshape"}, {"heads_merge_reshape"}):
                assert same(KATA.reference(c.inputs, frozenset(slips)), c.expected, **F32)


def test_top_left_is_torchs_is_causal():
    """decode_top_left is what is_causal=True gives a step with a cache (torch aligns it top-left)."""
    for c in CASES:
        i = {n: torch.tensor(v, dtype=torch.float64) for n, v in c.inputs.items() if isinstance(v, np.ndarray)}
        B, T, D = i["x_new"].shape
        H = c.inputs["num_heads"]
        slipped = KATA.reference(c.inputs, frozenset({"decode_top_left"}))
        assert slipped is not None
        q = F.linear(i["x_new"], i["w_q"]).view(B, T, H, D // H).transpose(1, 2)
        k, v = (torch.tensor(a) for a in slipped[1:])
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = F.linear(context.transpose(1, 2).reshape(B, T, D), i["w_o"])
        assert np.allclose(out.numpy(), slipped[0], rtol=1e-12, atol=1e-12)
