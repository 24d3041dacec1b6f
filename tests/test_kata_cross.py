"""The cross kata: its reference is nn.MultiheadAttention's cross-attention, its hand cases are the exact engine's,
every catalogued mistake shows on its cases, its solutions pass and its held-back buggy files are named."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
from torch import nn

from tutor.base.messages import EN
from tutor.drills.bank import load as load_bank
from tutor.katas import catalog
from tutor.katas.cross import KATA, reference

from .kata_proofs import FILES, confused, held_back, held_back_problems, invisible, run_file, solution_problems

CASES = KATA.cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_reference_is_nn_multihead_attention(case):
    """nn.MultiheadAttention(D, H, bias=False, kdim=D, vdim=D, batch_first=True), in_proj_weight = [w_q; w_k; w_v],
    out_proj.weight = w_o, called on (x, memory, memory) with key_padding_mask (True = padding) and
    average_attn_weights=False, returns the reference's (out, weights)."""
    i = case.inputs
    D, H = i["x"].shape[-1], i["num_heads"]
    mha = nn.MultiheadAttention(D, H, bias=False, kdim=D, vdim=D, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([i["w_q"], i["w_k"], i["w_v"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(i["w_o"]))
        pad = None if i["key_padding_mask"] is None else torch.from_numpy(i["key_padding_mask"])
        memory = torch.from_numpy(i["memory"])
        out, weights = mha(torch.from_numpy(i["x"]), memory, memory, key_padding_mask=pad,
                           average_attn_weights=False)
    want = reference(i, frozenset())
    np.testing.assert_allclose(want[0], out.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(want[1], weights.numpy(), rtol=1e-12, atol=1e-12)


def test_hand_cases_expected_values_are_the_reference_s():
    hand = [c for c in CASES if c.hand]
    assert len(hand) == 2
    for c in hand:
        out, weights = reference(c.inputs, frozenset())
        np.testing.assert_allclose(out, c.expected[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(weights, c.expected[1], rtol=1e-12, atol=1e-12)


def test_the_hand_layer_is_hand_sized_and_its_weights_do_not_tie():
    for c in (c for c in CASES if c.hand):
        assert all(set(np.unique(c.inputs[w])) <= {0.0, 1.0} for w in ("x", "memory", "w_q", "w_k", "w_v", "w_o"))
        weights = c.expected[1][0]  # [H, L_q, L_k]
        for row in weights.reshape(-1, weights.shape[-1]):
            live = np.sort(row[row > 0])
            assert len(live) >= 2 and np.diff(live).min() > 0.03


def test_the_cases_have_what_the_issue_asks():
    gen = [c for c in CASES if not c.hand]
    assert {c.dtype for c in gen} == {"float32", "float64"}
    assert all(c.sizes["B"] > 1 and c.sizes["H"] >= 2 and c.sizes["d_k"] >= 2 for c in gen)
    assert any(c.sizes["L_q"] < c.sizes["L_k"] for c in gen) and any(c.sizes["L_q"] > c.sizes["L_k"] for c in gen)
    pads = [c.inputs["key_padding_mask"] for c in CASES if c.inputs["key_padding_mask"] is not None]
    assert pads and all(p.any(axis=1).all() and (~p).any(axis=1).all() for p in pads)  # a pad and a real key each
    assert all(not np.array_equal(c.inputs["x"], c.inputs["memory"]) for c in CASES)
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_mistake_shows_and_parts_from_every_other():
    assert invisible(KATA) == []
    assert confused(KATA) == []


def test_the_kata_is_registered_and_every_mistake_has_its_sentence():
    assert catalog.get("cross") is KATA
    bank = load_bank()
    assert [bank.get(f).id for f in KATA.follow_ups] == list(KATA.follow_ups)  # concepts of the bank
    assert catalog.IDS.index("cross") == catalog.IDS.index("masks") + 1
    ours = {"sources_swapped", "kv_from_x", "weights_not_transposed", "padding_rows", "padding_polarity"}
    from_mha = {"no_scaling", "softmax_columns", "heads_split_reshape", "heads_merge_reshape", "no_out_proj"}
    assert {m.key for m in KATA.mistakes} == ours | from_mha  # the mha section words those
    assert all(f"code.mistake.{key}" in EN for key in ours)


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_the_reference_solutions_pass_every_case(flavour):
    assert solution_problems(KATA, flavour) == []


def test_the_numpy_skeleton_loads_and_raises_not_implemented():
    result, _ = run_file(KATA, FILES / "cross" / "numpy_start.py")
    assert (result.status, result.flavour) == ("ran", "numpy")
    assert all(r.exception == "NotImplementedError" for r in result.cases) and len(result.cases) == len(CASES)


def test_the_skeletons_define_the_function_the_solutions_do():
    def signature(flavour: str, kind: str) -> tuple[str, str]:
        tree = ast.parse((FILES / "cross" / f"{flavour}_{kind}.py").read_text(encoding="utf-8"))
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
