"""The ``mha`` kata: its reference is PyTorch's own module, its hand cases the exact engine's numbers (issue 21)."""

from __future__ import annotations

import numpy as np
import torch

from tutor.katas.mha import KATA, reference


def _torch_mha(inputs: dict) -> tuple[np.ndarray, np.ndarray]:
    """nn.MultiheadAttention (batch_first, one fused in_proj in the same Q, K, V row order) on the case's numbers."""
    x = torch.tensor(inputs["x"])
    B, L, D = x.shape
    H = inputs["num_heads"]
    layer = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.tensor(inputs["qkv_weight"]))
        layer.in_proj_bias.copy_(torch.tensor(inputs["qkv_bias"]))
        layer.out_proj.weight.copy_(torch.tensor(inputs["out_weight"]))
        layer.out_proj.bias.copy_(torch.tensor(inputs["out_bias"]))
        mask = inputs["mask"]
        attn_mask = None
        if mask is not None:  # nn.MultiheadAttention's bool attn_mask: True = NOT allowed; [B·H, L, L]
            attn_mask = ~torch.tensor(np.broadcast_to(mask, (B, H, L, L)).reshape(B * H, L, L))
        out, w = layer.eval()(x, x, x, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    return out.numpy(), w.numpy()


def test_reference_is_pytorchs_multihead_attention() -> None:
    for case in KATA.cases():
        if case.id == "fully-masked-row":  # nn.MultiheadAttention gives NaN there: compared below
            continue
        out, w = _torch_mha(dict(case.inputs))
        mine = reference(case.inputs, frozenset())
        assert mine is not None
        np.testing.assert_allclose(mine[0], out, rtol=1e-10, atol=1e-12, err_msg=case.id)
        np.testing.assert_allclose(mine[1], w, rtol=1e-10, atol=1e-12, err_msg=case.id)


def test_a_fully_masked_row_is_zero_here_and_nan_in_nn_multiheadattention() -> None:
    """The kata's convention (zero weights) against nn.MultiheadAttention (torch 2.13, CPU): NaN on that row,
    the other rows equal."""
    case = next(c for c in KATA.cases() if c.id == "fully-masked-row")
    out, w = _torch_mha(dict(case.inputs))
    mine_out, mine_w = reference(case.inputs, frozenset())
    empty = ~np.broadcast_to(case.inputs["mask"], mine_w.shape).any(axis=-1)  # [B, H, L]
    assert np.isnan(w[empty]).all() and (mine_w[empty] == 0).all()
    np.testing.assert_allclose(mine_w[~empty], w[~empty], rtol=1e-10, atol=1e-12)
    rows = empty.any(axis=1)  # [B, L]: a token whose row is empty in some head
    np.testing.assert_allclose(mine_out[~rows], out[~rows], rtol=1e-10, atol=1e-12)


def test_hand_cases_are_the_exact_engines_numbers() -> None:
    """The hand-sized cases' expected values come from the exact engine; the float reference agrees."""
    hand = [c for c in KATA.cases() if c.hand]
    assert {c.id for c in hand} == {"hand-fused", "hand-causal"}
    for case in hand:
        mine = reference(case.inputs, frozenset())
        for a, b in zip(mine, case.expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_the_causal_hand_case_by_hand() -> None:
    """two-head-causal-3x4: the first token sees only itself, so its weights are [1, 0, 0] in every head."""
    case = next(c for c in KATA.cases() if c.id == "hand-causal")
    w = case.expected[1]
    np.testing.assert_array_equal(w[0, :, 0], [[1, 0, 0], [1, 0, 0]])
    assert (w[0, :, 0, 1:] == 0).all() and (w[0, :, 1, 2] == 0).all()
