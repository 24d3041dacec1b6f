"""What the fresh-user trial of the backward pass and the online softmax found, each as a test."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from tutor.exact.numbers import Rat
from tutor.exercise.catalog import resolve
from tutor.steps import solve


def test_a_given_matrix_has_enough_places_to_work_the_answer_from(cli):
    """d_Q of the decode step worked from d_scaled shown at 4 places gave -0.0106, not -0.0107: the
    givens now have 6 places, and a 4-place answer worked from them is right."""
    code, out, _ = cli("practice", "decode-one-token-cache-3", "--steps", "d_q", input="quit\n",
                       env={"COLUMNS": "120"})
    assert code == 0
    shown = [float(x.replace("−", "-")) for x in out.split("│ on │")[1].split("│")[:4]]
    sol = solve(resolve("decode-one-token-cache-3"), backward=True)
    np.testing.assert_allclose(shown, sol.step("d_scaled", 0).value[0], atol=5e-7)
    K = np.array(sol.step("k", 0).value)
    worked = np.round(np.array(shown) @ K / np.sqrt(2), 4)
    code, out, _ = cli("practice", "decode-one-token-cache-3", "--steps", "d_q",
                       input=" ".join(f"{v:.4f}" for v in worked) + "\n")
    assert "✓ Right" in out, out


def test_k_v_steps_are_named_by_their_k_v_head_in_practice_and_check(cli, tmp_path):
    code, out, _ = cli("practice", "gqa-four-heads-2x4", "--steps", "d_k", input="skip\nquit\n")
    assert "Step 2 of 2, K/V head 2: Gradient of K" in out and "Step 2 of 2, head 3" not in out
    path = tmp_path / "s.yaml"
    path.write_text("exercise: gqa-four-heads-2x4\nheads:\n  - {}\n  - {}\n  - d_k: [[1], [1]]\n")
    code, out, _ = cli("check", str(path), env={"COLUMNS": "200"})
    assert code == 1 and "d_k (K/V head 2)" in out and "d_k (head 3)" not in out


def test_the_matrices_given_for_d_x_say_whose_they_are(cli):
    code, out, _ = cli("practice", "gqa-four-heads-2x4", "--steps", "d_x", input="quit\n", env={"COLUMNS": "400"})
    for name in ("d_Q (head 1)", "W_Q (head 4)", "d_K (K/V head 1)", "W_V (K/V head 2)"):
        assert name in out, name


def test_the_cache_sentence_of_d_v_speaks_of_values():
    sol = solve(resolve("decode-one-token-cache-3"), backward=True)
    from tutor.steps import KINDS

    d_v = " ".join(map(str, KINDS["d_v"].why(sol.step("d_v", 0), sol.exercise)))
    d_k = " ".join(map(str, KINDS["d_k"].why(sol.step("d_k", 0), sol.exercise)))
    assert "the cached values" in d_v and "the cached keys" in d_k


@pytest.mark.parametrize("seed", range(12))
def test_d_b_k_is_exactly_0_without_a_cache_as_its_sentence_says(seed):
    """step.d_b_k.why.zero: each row of d_scaled sums to 0, so Σ_rows d_K = Σ_i (Σ_j d_scaled_ij)·q_i/√d_k = 0.
    Checked exactly on random exercises with b_K (grouped heads, masks, a bias); with a cache it need not be."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)

    def m(r, c):
        return [[f"{int(n)}/{int(d)}" for n, d in zip(rn, rd)] for rn, rd in
                zip(rng.integers(-3, 4, (r, c)), rng.integers(1, 3, (r, c)))]

    H, cached = (2, seed % 2 == 1)
    L, past = 2, (2 if cached else 0)
    data = {"id": f"bk-{seed}", "title": "t", "x": m(L, 2), "num_heads": H,
            "heads": [{"w_q": m(2, 2), "w_k": m(2, 2), "w_v": m(2, 2), "b_k": m(1, 2)[0]} for _ in range(H)]}
    if cached:
        data.update(past_tokens=["a", "b"], cache=[{"k": m(past, 2), "v": m(past, 2)} for _ in range(H)],
                    mask="causal_lower_right")
    elif seed % 4 == 0:
        data["mask"] = "causal"
    if seed % 3 == 0:
        data["alibi"] = True
    ex = exercise_from_data(data)
    sol = solve(ex, backward=True)
    zero = [all(e == Rat(Fraction(0)) for e in sol.step("d_b_k", h).exact[0]) for h in range(H)]
    if not cached:
        assert all(zero), seed
    else:
        assert not all(zero), seed  # the new rows alone need not sum to 0 (so the sentence is not said there)


def test_the_markdown_handout_sums_a_group_and_slices_a_cache(cli):
    code, out, _ = cli("explain", "gqa-four-heads-2x4", "--backward", "--format", "markdown")
    assert r"d_K = \sum_{h \in \{1, 2\}} \frac{d_{\text{scaled}_h}^\top Q_h}" in out
    assert r"\text{K/V head 1, summed over query heads 1, 2}" in out
    assert r"d_{\text{head}_{1}} = d_{\text{output}}[:, \text{head } 1]" in out  # no W_O: no concat to split
    code, out, _ = cli("explain", "decode-one-token-cache-3", "--backward", "--format", "markdown")
    assert r"d_{W_K} = X^\top d_K[\text{new rows}]" in out


def test_the_d_x_annotation_adds_matrices_of_its_shape():
    sol = solve(resolve("two-head-causal-3x4"), backward=True)
    assert sol.step("d_x").annotation() == "d_Q·W_Qᵀ [3×4] + d_K·W_Kᵀ [3×4] + d_V·W_Vᵀ [3×4] → d_X [3×4]"


def test_backward_mistakes_an_exercise_cannot_catch_are_said(cli):
    """gqa-four-heads-2x4: heads 1 and 2 have zero d_scaled, so K/V head 1's d_K is 0 with or without the
    sum over the group; d_k = 1, so the 1/√d_k is 1. Both listed (JSON) and said (practice)."""
    code, out, _ = cli("explain", "gqa-four-heads-2x4", "--backward", "--format", "json")
    steps = {(s["id"], s["head"], s.get("kv_head")): s["indistinguishable"] for s in json.loads(out)["steps"]}
    assert {"kv_grad_not_summed", "grad_no_scale"} <= set(steps["d_k", None, 0])
    assert "kv_grad_not_summed" not in steps["d_k", None, 1]
    code, out, _ = cli("explain", "single-head-3x4", "--backward", "--format", "json")
    steps = {(s["id"], s["head"]): s["indistinguishable"] for s in json.loads(out)["steps"]}
    assert "grad_no_scale" not in steps["d_q", 0]  # d_k = 2 there
    code, out, _ = cli("practice", "gqa-four-heads-2x4", "--steps", "d_k", input="0; 0\nquit\n", env={"COLUMNS": "200"})
    assert "taking one query head's share of the K/V gradient gives the same d_K" in out


# --- the hostile trial ------------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["²", "9" * 5000, "٣"])
def test_a_query_that_only_looks_like_a_number_is_a_usage_error(cli, query):
    code, out, err = cli("practice", "single-head-3x4", "--tiled", "--query", query, input="quit\n")
    assert code == 2 and out == "" and err.startswith("error: invalid value for --query: "), err


def test_a_huge_whole_number_in_a_tiled_part_is_refused_in_one_line(cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("exercise: alibi-causal-3x2\ntiled:\n  block_size: 1\n  query: t1\n  head: " + "9" * 5000
                    + "\n  blocks: [{m: 1}]\n")
    code, out, err = cli("check", str(path))
    assert code == 2 and "internal error" not in err and "Traceback" not in err, err


def test_a_count_too_large_for_a_float_is_no_answer(cli):
    code, out, err = cli("drill", "counts", "--count", "1", "--seed", "1", input="1e999\nquit\n")
    assert code == 0 and "internal error" not in err
    assert 'cannot read "1e999" as a number' in out


def test_an_exercise_that_blocks_every_key_explains_its_backward_pass_quietly(cli, tmp_path):
    path = tmp_path / "allpad.yaml"
    path.write_text("id: allpad\ntitle: every key padded\nx: [[1, 0], [0, 1]]\nheads:\n"
                    "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
                    "key_padding_mask: [true, true]\n")
    code, out, err = cli("explain", str(path), "--backward", env={"PYTHONWARNINGS": "error"})
    assert code == 0 and err == "", err


def test_the_exact_backward_pass_refuses_an_exercise_too_large_to_write_out(cli, tmp_path):
    """16 tokens, 8 heads, d_model = 32 took a minute and 96 MB of exact text: refused in one line, exit 2,
    by explain, practice and check alike; the NumPy core's backward still runs it."""
    from tutor.authoring.generate import Spec, generate
    from tutor.exercise import load_exercise
    from tutor.production import layer_backward

    path = tmp_path / "big.yaml"
    path.write_text(generate(Spec(tokens=16, heads=8, d_model=32, d_k=4, seed=7)))
    for args in (["explain", str(path), "--backward"], ["practice", str(path), "--backward"]):
        code, out, err = cli(*args, input="quit\n")
        assert code == 2 and out == "", args
        assert err.startswith("error: the backward pass is worked out exactly for exercises up to "
                              "num_heads·L·L_k²·d_model = 16,384;"), err
    sol = tmp_path / "s.yaml"
    sol.write_text(f"exercise: {path}\nd_output: [[1]]\n")
    code, _, err = cli("check", str(sol))
    assert code == 2 and "worked out exactly for exercises up to" in err
    assert layer_backward(load_exercise(str(path))).d_x.shape == (16, 32)


def test_a_softmax_row_of_very_negative_scores_is_worked_out_shifted(cli, tmp_path):
    """A bias of -800 made every exp() underflow: 'Σ ≈ 0.0000 + 0.0000 + 0.0000' and weights '0.0000 / 0.0000'.
    The row is shifted by its largest score, as a row over 20 already was; the weights do not change."""
    path = tmp_path / "neg.yaml"
    path.write_text("id: neg\ntitle: t\nx: [[1, 0], [0, 1], [1, 1]]\nheads:\n"
                    "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
                    "attn_bias: [[-800, -800, -800], [-800, -800, -800], [-800, -800, -800]]\n")
    code, out, _ = cli("explain", str(path), env={"COLUMNS": "200"})
    assert code == 0
    assert "0.0000 / 0.0000" not in out and "Σ ≈ 0.0000" not in out
    assert "exp(−800.0000 − (−799.2929)) ≈ 0.4931" in out


def test_a_typed_logarithm_is_refused_with_what_to_type_instead():
    """practice --tiled's lse hint writes m + log(l); typing log(2) said only 'unknown name "log"'."""
    from tutor.answers import parse_entry
    from tutor.base.errors import TutorError

    for text in ("log(2)", "ln(2)", "1 + log(2)"):
        with pytest.raises(TutorError) as err:
            parse_entry(text)
        assert "a logarithm is not part of what answers can be written in" in str(err.value), text
