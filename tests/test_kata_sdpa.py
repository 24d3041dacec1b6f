"""The sdpa kata: its reference is PyTorch's scaled_dot_product_attention, its hand cases the exact engine's,
every catalogued mistake shows on its cases, its solutions pass and its held-back buggy files are named."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from tutor.base.messages import EN
from tutor.drills.bank import load as load_bank
from tutor.katas import catalog
from tutor.katas.sdpa import KATA, reference

from .kata_proofs import (
    FILES,
    confused,
    held_back,
    held_back_problems,
    invisible,
    run_file,
    solution_problems,
)

CASES = KATA.cases()


def _t(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a))


def _torch_sdpa(case_inputs) -> tuple[np.ndarray, np.ndarray]:
    """``(out, weights)`` by PyTorch itself, float64: out from SDPA, the weights from SDPA with V = I
    (weights · I = weights), since SDPA does not return them."""
    q, k, v = (_t(case_inputs[n]) for n in ("q", "k", "v"))
    mask, causal = _t(case_inputs["mask"]), bool(case_inputs["is_causal"])
    eye = torch.eye(k.shape[-2], dtype=torch.float64).expand(*k.shape[:-1], k.shape[-2])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, is_causal=causal)
    return out.numpy(), weights.numpy()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_reference_is_pytorchs_sdpa(case):
    out, weights = reference(case.inputs, frozenset())
    t_out, t_weights = _torch_sdpa(case.inputs)
    np.testing.assert_allclose(out, t_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, t_weights, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pytorch_gives_a_fully_masked_row_zeros_as_the_docstring_says(backend, dtype):
    """torch 2.13, CPU: a query with no key gets a zero output row, with a bool mask and with an additive -inf one."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 3, 4, generator=gen, dtype=dtype) for _ in range(3))
    allowed = torch.ones(3, 3, dtype=torch.bool)
    allowed[1] = False
    additive = torch.zeros(3, 3, dtype=dtype).masked_fill(~allowed, float("-inf"))
    with sdpa_kernel([backend]):
        for mask in (allowed, additive):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            assert torch.equal(out[:, :, 1], torch.zeros(2, 2, 4, dtype=dtype))
            assert torch.isfinite(out).all()


def test_nn_multihead_attention_gives_a_fully_masked_row_nan_with_its_weights():
    """The docstring's contrast: nn.MultiheadAttention, need_weights=True (its default), gives NaN there."""
    mha = nn.MultiheadAttention(4, 2, bias=False, batch_first=True)
    x = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    blocked = torch.zeros(3, 3, dtype=torch.bool)
    blocked[1] = True  # nn.MultiheadAttention's polarity: True = may not attend
    with torch.no_grad():
        out, weights = mha(x, x, x, attn_mask=blocked)
    assert torch.isnan(out[0, 1]).all() and torch.isnan(weights[0, 1]).all()
    assert torch.isfinite(out[0, [0, 2]]).all()


def test_hand_cases_expected_values_are_the_reference_s():
    hand = [c for c in CASES if c.hand]
    assert len(hand) == 4
    for c in hand:
        out, weights = reference(c.inputs, frozenset())
        np.testing.assert_allclose(out, c.expected[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(weights, c.expected[1], rtol=1e-12, atol=1e-12)


def test_the_cases_have_what_the_issue_asks():
    gen = [c for c in CASES if not c.hand]
    assert {c.dtype for c in gen} == {"float32", "float64"}
    assert all(c.sizes["B"] > 1 and c.sizes["H"] >= 2 and c.sizes["d_k"] >= 2 for c in gen)
    assert any(c.sizes["L_q"] != c.sizes["L_k"] for c in gen)
    assert any(c.sizes["d_v"] != c.sizes["d_k"] for c in gen)
    assert any(c.kwargs.get("is_causal") for c in gen)
    assert any("mask" in c.kwargs and c.kwargs["mask"].shape[-2] == 1 for c in gen)  # key padding
    assert any("mask" in c.kwargs and (~c.kwargs["mask"].any(axis=-1)).any() for c in gen)  # a fully masked row
    assert not any("mask" in c.kwargs and "is_causal" in c.kwargs for c in CASES)  # PyTorch refuses the pair
    assert all(0.0 < c.expected[1].max() < 0.9 or c.kwargs.get("is_causal") for c in gen)  # far from one-hot
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_mistake_shows_and_parts_from_every_other():
    assert invisible(KATA) == []
    assert confused(KATA) == []


def test_the_kata_is_registered_and_every_mistake_has_its_sentence():
    assert catalog.get("sdpa") is KATA
    bank = load_bank()
    assert [bank.get(f).id for f in KATA.follow_ups] == list(KATA.follow_ups)  # concepts of the bank
    assert catalog.IDS.index("sdpa") == catalog.IDS.index("mha") + 1
    ours = {"mask_upper", "mask_diagonal", "causal_ignored"}
    from_mha = {"no_scaling", "scale_d_k", "kq_transposed", "softmax_columns", "times_k", "mask_inverted",
                "mask_added", "no_mask", "mask_after_softmax", "empty_row_nan", "empty_row_uniform"}
    assert {m.key for m in KATA.mistakes} == ours | from_mha  # the mha section words those
    assert all(f"code.mistake.{key}" in EN for key in ours)


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_the_reference_solutions_pass_every_case(flavour):
    assert solution_problems(KATA, flavour) == []


def test_the_numpy_skeleton_loads_and_raises_not_implemented():
    result, got = run_file(KATA, FILES / "sdpa" / "numpy_start.py")
    assert (result.status, result.flavour) == ("ran", "numpy")
    assert all(r.exception == "NotImplementedError" for r in result.cases) and len(result.cases) == len(CASES)


def test_the_skeletons_define_the_function_the_solutions_do():
    def signature(flavour: str, kind: str) -> tuple[str, ...]:
        tree = ast.parse((FILES / "sdpa" / f"{flavour}_{kind}.py").read_text(encoding="utf-8"))
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == KATA.numpy_name)
        top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        named = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "KATA"]
        assert named == [KATA.id]
        return (ast.unparse(fn.args), "torch" if "torch" in top else "numpy")

    for flavour in ("numpy", "torch"):
        assert signature(flavour, "start") == signature(flavour, "solution")
        assert signature(flavour, "start")[1] == flavour


@pytest.mark.parametrize("path", held_back(KATA), ids=lambda p: p.stem)
def test_a_held_back_buggy_file_gives_what_its_mistake_gives(path):
    assert held_back_problems(KATA, path) == []


def test_every_mistake_has_a_held_back_file_and_two_are_pytorch():
    stems = [p.stem for p in held_back(KATA)]
    assert {s.removesuffix("_torch") for s in stems} == {m.key for m in KATA.mistakes}
    assert sum(s.endswith("_torch") for s in stems) >= 2
