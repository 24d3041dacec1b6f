"""The masks kata: its reference follows PyTorch's own mask conventions, its hand cases are the exact engine's,
every catalogued mistake shows on its cases, its solutions pass and its held-back buggy files are named."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tutor.base.messages import EN
from tutor.drills.bank import load as load_bank
from tutor.katas import catalog
from tutor.katas.masks import KATA, reference

from .kata_proofs import FILES, confused, held_back, held_back_problems, invisible, run_file, solution_problems

CASES = KATA.cases()


def test_the_additive_causal_mask_is_pytorchs_square_subsequent_mask():
    for L in (1, 4, 7):
        _, additive = reference({"key_padding_mask": np.zeros((1, L), dtype=bool), "is_causal": True}, frozenset())
        want = nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64).numpy()
        np.testing.assert_array_equal(additive[0, 0], want)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_nn_multihead_attention_with_its_own_masks_is_sdpa_with_ours(case):
    """nn.MultiheadAttention given key_padding_mask (True = padding) and, for a causal case, its bool attn_mask
    (True = blocked) with is_causal=True, computes what SDPA computes with the kata's ``additive`` mask, and
    with its ``allowed`` one (True = may attend) -- fully masked rows included (zeros, need_weights=False);
    its weights (need_weights=True) are zero exactly where ``allowed`` is False, on every row with a key."""
    kpm = torch.from_numpy(case.inputs["key_padding_mask"])
    causal = bool(case.inputs["is_causal"])
    allowed, additive = (torch.from_numpy(a) for a in reference(case.inputs, frozenset()))
    B, L = kpm.shape
    D, H = 8, 2
    gen = torch.Generator().manual_seed(21)
    mha = nn.MultiheadAttention(D, H, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.randn(3 * D, D, generator=gen, dtype=torch.float64))
        x = torch.randn(B, L, D, generator=gen, dtype=torch.float64)
        blocked = torch.ones(L, L, dtype=torch.bool).triu(1) if causal else None
        theirs, _ = mha(x, x, x, key_padding_mask=kpm, attn_mask=blocked, is_causal=causal, need_weights=False)
        _, weights = mha(x, x, x, key_padding_mask=kpm, attn_mask=blocked, average_attn_weights=False)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, L, H, D // H).transpose(1, 2)

        q, k, v = (heads(t) for t in F.linear(x, mha.in_proj_weight).chunk(3, dim=-1))
        for mask in (additive, allowed):
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            ours = F.linear(context.transpose(1, 2).reshape(B, L, D), mha.out_proj.weight)
            torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    rows = allowed.expand(B, H, L, L).any(dim=-1)  # [B, H, L]: the rows with a key (the others are NaN there)
    assert torch.equal((weights > 0)[rows], allowed.expand(B, H, L, L)[rows])


def test_hand_cases_expected_values_are_the_reference_s():
    hand = [c for c in CASES if c.hand]
    assert len(hand) == 2
    for c in hand:
        allowed, additive = reference(c.inputs, frozenset())
        np.testing.assert_array_equal(allowed, c.expected[0])
        np.testing.assert_array_equal(additive, c.expected[1])


def test_the_cases_have_what_the_issue_asks():
    gen = [c for c in CASES if not c.hand]
    assert all(c.sizes["B"] > 1 for c in gen)
    assert {c.kwargs["is_causal"] for c in CASES} == {True, False}
    pads = [c.inputs["key_padding_mask"] for c in gen]
    assert any(p[:, 0].any() for p in pads) and any(p[:, -1].any() for p in pads)  # left and right padding
    assert any((~p).all(axis=1).any() for p in pads)  # a member without padding
    assert any((~c.expected[0].any(axis=-1)).any() for c in gen)  # a fully masked row
    assert all(((~p).any(axis=1)).all() for p in pads)  # no member all padding
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_mistake_shows_and_parts_from_every_other():
    assert invisible(KATA) == []
    assert confused(KATA) == []


def test_the_kata_is_registered_and_every_mistake_has_its_sentence():
    assert catalog.get("masks") is KATA
    bank = load_bank()
    assert [bank.get(f).id for f in KATA.follow_ups] == list(KATA.follow_ups)  # concepts of the bank
    assert catalog.IDS.index("masks") == catalog.IDS.index("sdpa") + 1
    for m in KATA.mistakes:
        assert f"code.mistake.{m.key}" in EN
        assert "{" not in EN[f"code.mistake.{m.key}"].format(**m.fields)


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_the_reference_solutions_pass_every_case(flavour):
    assert solution_problems(KATA, flavour) == []


def test_the_numpy_skeleton_loads_and_raises_not_implemented():
    result, _ = run_file(KATA, FILES / "masks" / "numpy_start.py")
    assert (result.status, result.flavour) == ("ran", "numpy")
    assert all(r.exception == "NotImplementedError" for r in result.cases) and len(result.cases) == len(CASES)


def test_the_skeletons_define_the_function_the_solutions_do():
    def signature(flavour: str, kind: str) -> tuple[str, str]:
        tree = ast.parse((FILES / "masks" / f"{flavour}_{kind}.py").read_text(encoding="utf-8"))
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == KATA.numpy_name)
        top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        named = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "KATA"]
        assert named == [KATA.id]
        return ast.unparse(fn.args), "torch" if "torch" in top else "numpy"

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


@pytest.mark.parametrize("fill", [-1e9, -1e4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_large_negative_fill_gives_a_fully_masked_row_weights_as_the_sentence_says(fill, dtype):
    """What ``code.mistake.mask_large_negative`` says: rows with a key get -inf's weights; the row with none gets
    the unmasked softmax (the fill cancels, up to its rounding of the scores), uniform in float32 with -1e9;
    with -inf it gets zeros."""
    gen = torch.Generator().manual_seed(5)
    q, k = (torch.randn(1, 1, 4, 3, generator=gen, dtype=dtype) for _ in range(2))
    eye = torch.eye(4, dtype=dtype)[None, None]  # V = I: the output is the weights
    inputs = {"key_padding_mask": np.array([[True, False, False, False]]), "is_causal": True}  # row 0: no key
    _, right = (torch.from_numpy(a).to(dtype) for a in reference(inputs, frozenset()))
    slip = "fill_neg_1e9" if fill == -1e9 else "fill_neg_1e4"
    _, filled = (torch.from_numpy(a).to(dtype) for a in reference(inputs, frozenset({slip})))
    assert filled.min().item() == fill
    want = F.scaled_dot_product_attention(q, k, eye, attn_mask=right)
    got = F.scaled_dot_product_attention(q, k, eye, attn_mask=filled)
    torch.testing.assert_close(got[..., 1:, :], want[..., 1:, :])
    assert torch.equal(want[0, 0, 0], torch.zeros(4, dtype=dtype))
    if fill == -1e9 and dtype == torch.float32:
        torch.testing.assert_close(got[0, 0, 0], torch.full((4,), 0.25, dtype=dtype))
    else:
        unmasked = F.scaled_dot_product_attention(q, k, eye)[0, 0, 0]  # the fill's rounding off the scores aside
        torch.testing.assert_close(got[0, 0, 0], unmasked, rtol=0, atol=1e-3 if dtype == torch.float32 else 1e-7)
