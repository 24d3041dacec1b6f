"""Exercises that can tell the classic mistakes apart (issue 11, item 2).

Which misconceptions give *exactly* the right matrix at a step (so no answer
can reveal them there): decided by floats where they clearly differ, and by
the exact walk (exponential polynomials, Lindemann–Weierstrass) otherwise.
The oracles here are hand calculations and NumPy written in the test.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from tutor.exact.expoly import Poly, Value, surds
from tutor.exact.matrices import entry_value
from tutor.exercise import parse_exercise
from tutor.exercise.catalog import bundled, resolve
from tutor.mistakes.diagnose import MISCONCEPTIONS
from tutor.mistakes.invisible import CORE, by_step, invisible, notes, uncaught
from tutor.steps import RIGHT, NoExactForm, Variant, exact_replay, replay, solve, supports

from .conftest import EXERCISES

# --- the exact arithmetic ----------------------------------------------------------------------------------------

R2 = surds([(2, Fraction(1))])  # √2


def test_a_negative_value_rounds_and_cuts_to_a_negative_decimal():
    """-15/2·√2 = -10.6066…: rounded to 2 places -10.61, cut -10.60 (mpmath's ``man_exp`` leaves the sign
    out; a rounded or cut negative scaled score once came out positive, and the exact walk disagreed with
    the float walk under ``rounded_scaled`` on any exercise with a negative irrational score)."""
    v = Value.of(Fraction(-15, 2), 2)
    assert v.rounded(2) == Fraction(-1061, 100) and v.truncated(2) == Fraction(-1060, 100)
    assert (-v).rounded(2) == Fraction(1061, 100) and (-v).truncated(2) == Fraction(1060, 100)
    assert Value.of(Fraction(-1, 3)).rounded(4) == Fraction(-3333, 10000)


def test_a_value_on_a_decimal_cuts_and_rounds_as_that_decimal():
    """7/5 = √2·(7/5)/√2 read through binary digits is 1.3999…: cut to 2 places it is 1.40, not 1.39 (the
    exact walk once cut the pre-norm block's scaled score 7/5 to 1.39); a half rounds to even, exactly."""
    v = Value.of(Fraction(7, 5), 2) * Value.of(Fraction(1, 2), 2)  # (7√2/5)·(√2/2) = 7/5, by hand
    assert v.truncated(2) == Fraction(140, 100) and (-v).truncated(2) == Fraction(-140, 100)
    assert v.truncated(0) == 1 and v.rounded(1) == Fraction(14, 10)
    half = Value.of(Fraction(1, 4), 2) * Value.of(Fraction(1, 2), 2)  # 1/4: a tie at one place, to even
    assert half.rounded(1) == Fraction(2, 10) and (-half).rounded(1) == Fraction(-2, 10)
    assert Value.of(1, 2).truncated(2) == Fraction(141, 100)  # √2 is on no decimal


def test_the_float_walk_cuts_a_value_within_round_off_of_a_decimal_as_that_decimal():
    """The float walk reads 1 computed as 0.9999999999999998 (the scaled score √2/√2 in float64) cut to 2
    places as 1.00, as a learner with the exact 1 does, not 0.99; 0.996 still cuts to 0.99."""
    from tutor.steps.state import Replay

    r = Replay(resolve("prenorm-rmsnorm-3x2"), Variant(round_scaled=2, truncate=True))
    r.values["scaled", 0] = np.array([[0.9999999999999998, -0.9999999999999998, 0.996], [1.4, -np.inf, 2.7718]])
    assert r.input("scaled", 0).tolist() == [[1.0, -1.0, 0.99], [1.4, -np.inf, 2.77]]


def test_equal_softmax_forms_are_equal_and_close_ones_are_not():
    e = Poly.exp
    # e^√2 / (e^√2 + 1) == 1 / (1 + e^-√2)
    a = Value.ratio(e(R2), e(R2) + Poly.const(surds([(1, Fraction(1))])))
    b = Value.ratio(Poly.const(surds([(1, Fraction(1))])),
                    Poly.const(surds([(1, Fraction(1))])) + e(surds([(2, Fraction(-1))])))
    assert a.equals(b) == (True, True)
    # e^√2 - 4.1132503787829275 is tiny but not 0: never equal to the rational
    c = Value.exp(R2)
    assert c.equals(Value.of(Fraction("4.1132503787829275"))) == (False, True)
    # √2·√2 = 2 and √2·√3 = √6: sums of square roots are kept apart
    assert (Value.of(1, 2) * Value.of(1, 2)).equals(Value.of(2)) == (True, True)
    assert (Value.of(1, 2) * Value.of(1, 3)).equals(Value.of(1, 6)) == (True, True)
    assert Value.of(1, 2).equals(Value.of(Fraction(141421356237, 10**11))) == (False, True)


def test_the_exact_walk_mirrors_the_float_walk_under_every_variant():
    """Every step of every bundled exercise under every misconception: the exact value rounds to the float one."""
    variants = [RIGHT] + [m.variant for m in MISCONCEPTIONS if m.variant is not None and supports(m.variant)]
    # the walk follows every knob but the heads' layout (averaged, split or merged by a plain reshape),
    # format v2's mistakes (K/V heads tiled, a decode step's mask top-left, the cache reprojected, the bias)
    # and the backward pass's (issue 13), which change no forward step: the float walk under them is the right one
    backward = {"softmax_grad_elementwise", "grad_no_scale", "d_k_not_transposed", "masked_grad_leak", "bias_grad_mean",
                "kv_grad_not_summed", "softmax_grad_diagonal", "d_k_order", "d_k_order_transposed",
                "rope_grad_not_unrotated", "rope_grad_turned_forward"}
    assert {m.key for m in MISCONCEPTIONS if m.variant is not None and not supports(m.variant)} == {
        "heads_averaged", "heads_split_reshape", "heads_merge_reshape",
        "kv_tile_order", "decode_top_left", "cache_reprojected", "bias_after_softmax", "alibi_sign",
        "alibi_shifted", "alibi_geometric",  # format v2's bias, as alibi_sign
        "scale_after_softmax",  # the weights divided after the softmax: the float walk alone (issue 20, C)
        # RoPE's (issue 23): cos and sin in the exponents are not algebraic, the floats decide
        "rope_pairing_mixed", "rope_positions_from_one", "rope_theta_without_two", "rope_v_rotated",
        "rope_half_interleaved_angles", "rope_interleaved_half_angles",
    } | backward
    right = {ex.id: replay(ex, RIGHT).values for ex in bundled()}
    for m in MISCONCEPTIONS:
        if m.key in backward:
            assert m.variant is not None
            for ex in bundled():
                forward = replay(ex, m.variant).values
                assert set(forward) == set(right[ex.id]), (ex.id, m.key)
                assert all(np.array_equal(forward[k], right[ex.id][k]) for k in forward), (ex.id, m.key)
    for ex in bundled():
        for v in variants:
            if not supports(v, ex):  # a KV cache or a bias: no exact walk (format v2), the floats decide
                with pytest.raises(NoExactForm):
                    exact_replay(ex, v)
                continue
            with np.errstate(all="ignore"):
                floats = replay(ex, v).values
            exact = exact_replay(ex, v)
            assert set(floats) - set(exact) <= {("out_norm", None)} and set(exact) <= set(floats), (ex.id, v)
            for key, value in floats.items():
                if key not in exact:  # post-norm's out_norm: no exact walk (a root of a sum of exponentials)
                    continue
                got = np.array([[entry_value(e) for e in row] for row in exact[key]])
                inf = np.isinf(got) | np.isinf(value)
                assert np.array_equal(got[inf], value[inf]), (ex.id, v, key)
                assert np.allclose(got[~inf], value[~inf], rtol=1e-12, atol=1e-12), (ex.id, v, key)


# --- the classic cannot catch K·Qᵀ; the new classic-sized exercise catches everything -----------------------------


def test_on_the_classic_k_q_transposed_and_weights_times_k_are_invisible():
    sol = solve(resolve("single-head-3x4"))
    # by hand: Q = K = V = [[1, 1], [2, 2], [2, 2]], so scores = Q·Kᵀ is symmetric and weights·K = weights·V
    assert [[str(e) for e in row] for row in sol.step("q", 0).exact] == [["1", "1"], ["2", "2"], ["2", "2"]]
    hidden = by_step(sol)
    assert {"kq_transposed", "transposed"} <= set(hidden["scores", 0])
    assert "kq_transposed" in hidden["weights", 0]
    assert {"kq_transposed", "times_k"} <= set(hidden["head_output", 0])
    assert "no_scaling" not in hidden["scaled", 0] and "softmax_columns" not in hidden["weights", 0]
    assert uncaught(sol) == [("kq_transposed", (("scores", 0),)), ("times_k", (("head_output", 0),))]


def _np_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_the_asymmetric_classic_tells_every_classic_mistake_apart():
    ex = resolve("single-head-asym-3x4")
    assert (ex.L, ex.d_model, ex.heads[0].d_k) == (3, 4, 2) and ex.heads[0].w_q != ex.heads[0].w_k
    assert all(v.denominator == 1 for m in (ex.x, ex.heads[0].w_q, ex.heads[0].w_k, ex.heads[0].w_v, ex.w_o)
               for row in m for v in row)
    x = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
    w_q = np.array([[0, 1], [0, 0], [0, 1], [1, 0]], float)
    w_k = np.array([[1, 0], [0, 1], [0, 0], [0, 0]], float)
    w_v = np.array([[1, 0], [0, 1], [0, 0], [1, 0]], float)
    w_o = np.array([[1, 1], [0, 1]], float)
    Q, K, V = x @ w_q, x @ w_k, x @ w_v
    S = Q @ K.T
    assert S.tolist() == [[0, 4, 2], [2, 0, 2], [1, 4, 3]]  # by hand: q_1 = (0, 2), k_2 = (0, 2): 4 ...
    A = S / math.sqrt(2)
    W = _np_softmax(A, -1)
    right_out = W @ V @ w_o
    # each classic mistake gives another matrix at the step where it is made
    assert not np.allclose(K @ Q.T, S)                                   # K·Qᵀ
    assert not np.allclose(_np_softmax(A, 0), W)                         # softmax down the columns
    assert not np.allclose(S, A)                                         # no scaling
    assert not np.allclose(S / math.sqrt(4), A)                          # √d_model
    assert not np.allclose(W @ V @ w_o.T, right_out)                     # W_Oᵀ
    assert not np.allclose(W @ K, W @ V)                                 # weights·K
    assert len({tuple(r) for r in Q.tolist()}) == 3                      # no two identical Q rows
    assert all(len(set(r)) > 1 for r in S.tolist())                      # no uniform weights row
    sol = solve(ex)
    assert invisible(sol, CORE) == [] and uncaught(sol) == []
    assert notes(sol) == {}


@pytest.mark.parametrize("exercise_id, expected", [
    ("single-head-3x4", ["kq_transposed", "times_k"]),              # Q = K = V
    ("single-head-asym-3x4", []),                                   # built to catch them all
    ("single-head-dk4-2x4", ["kq_transposed", "scale_sqrt_d_model", "softmax_columns"]),  # W_Q = W_K = I, d_k = d_model
    ("two-head-causal-3x4", ["kq_transposed", "w_o_transposed"]),   # W_Q = W_K per head, W_O = I
    ("two-head-dk1-3x4", ["kq_transposed", "no_scaling"]),          # Q = K, d_k = 1
    ("cross-attention-2x3", ["scale_sqrt_d_model"]),                # d_model = d_k = 2
    ("padding-4x2", ["scale_sqrt_d_model"]),                        # d_model = d_k = 2
    ("fully-masked-row-3x3", ["times_k"]),                          # W_K = W_V
    ("two-head-fused-3x4", []),
])
def test_what_each_bundled_exercise_cannot_catch(exercise_id, expected):
    assert [key for key, _ in uncaught(solve(resolve(exercise_id)))] == expected


# --- exactly, not to float round-off -----------------------------------------------------------------------------


SATURATED = """id: saturated
title: scores so large that the weights are 0 and 1 in float64
x: [[35, 0], [0, 35]]
heads:
  - w_q: [[1, 0], [0, 1]]
    w_k: [[1, 0], [0, 1]]
    w_v: [[1, 0], [0, 1]]
"""


def test_floats_that_agree_are_not_taken_for_equal_values():
    """Scores 1225 on the diagonal and 0 elsewhere: exp(-1225/√2) and exp(-1225) both underflow to 0.0, so the
    unscaled weights equal the right ones in float64 -- but not in exact arithmetic: the mistake shows."""
    ex = parse_exercise(SATURATED, "saturated.yaml")
    sol = solve(ex)
    right = np.array(sol.step("weights", 0).value)
    unscaled = replay(ex, Variant(scale="none")).values["weights", 0]
    assert np.array_equal(right, unscaled) and right.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert math.exp(-1225 / math.sqrt(2)) == 0.0  # underflow, as float64 computes it
    assert "no_scaling" not in by_step(sol)["weights", 0]
    # while a K·Qᵀ on these symmetric scores is exactly invisible
    assert "kq_transposed" in by_step(sol)["weights", 0]


def test_values_equal_exactly_are_found_even_when_their_floats_are_computed_differently():
    """On single-head-dk4-2x4 the scores are [[6, 4], [4, 6]]: a softmax down the columns gives exactly the
    row-wise weights (a symmetric matrix with equal row sums), whatever order floats add them in."""
    sol = solve(resolve("single-head-dk4-2x4"))
    assert [[str(e) for e in row] for row in sol.step("scores", 0).exact] == [["6", "4"], ["4", "6"]]
    found = [f for f in invisible(sol) if f.key == "softmax_columns" and f.step == ("weights", 0)]
    assert found and found[0].exact


def test_a_left_out_key_bias_cannot_change_the_weights():
    """padding-4x2 has b_K = (0, 1): it adds q_i·b_K to every score of row i, a constant per row, which the
    softmax removes -- so leaving b_K out changes K and the scores but never the weights."""
    hidden = by_step(solve(resolve("padding-4x2")))
    assert "no_b_k" not in hidden["k", 0] and "no_b_k" not in hidden["scores", 0]
    assert "no_b_k" in hidden["weights", 0] and "no_b_k" in hidden["head_output", 0]


# --- what a learner and an instructor read --------------------------------------------------------------------------


def test_explain_notes_the_invisible_mistake_where_it_is_made_and_suggests_an_exercise(cli):
    code, out, err = cli("explain", "single-head-3x4")
    assert (code, err) == (0, "")
    scores = out[out.index("4. Scores"):out.index("5. Scaled")]
    assert "Note: On this exercise K·Qᵀ = Q·Kᵀ because Q = K" in scores
    assert "Try `single-head-asym-3x4` to be tested on it." in scores.replace("\n   ", " ")
    assert "Note:" not in cli("explain", "single-head-asym-3x4")[1]
    assert "Note:" not in cli("explain", "single-head-3x4", "--format", "markdown", "--blank")[1]


def test_json_lists_the_indistinguishable_misconceptions_per_step(cli):
    code, out, _ = cli("explain", "single-head-3x4", "--format", "json")
    steps = {s["id"]: s for s in json.loads(out)["steps"]}
    assert code == 0
    assert steps["q"]["indistinguishable"] == []
    assert steps["scores"]["indistinguishable"] == ["kq_transposed", "transposed"]
    assert steps["head_output"]["indistinguishable"] == ["kq_transposed", "times_k"]
    keys = {m.key for m in MISCONCEPTIONS}
    assert all(set(s["indistinguishable"]) <= keys for s in steps.values())
    doc = json.loads(cli("explain", "single-head-asym-3x4", "--format", "json")[1])
    assert all(not set(s["indistinguishable"]) & set(CORE) for s in doc["steps"])


def test_validate_notes_what_an_exercise_cannot_catch_without_failing(cli, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text((EXERCISES / "single-head-3x4.yaml").read_text(encoding="utf-8").replace(
        "id: single-head-3x4", "id: mine"), encoding="utf-8")
    code, out, err = cli("validate", str(path))
    assert code == 0 and err.endswith("problems: 0\n")
    assert out.splitlines() == [
        f"{path}: note: cannot catch K·Qᵀ instead of Q·Kᵀ at scores because Q = K: it gives the right values there "
        "(give W_Q and W_K different columns, so that the scores are not symmetric)",
        f"{path}: note: cannot catch weights·K instead of weights·V at head_1 (K = V): it gives the right values there "
        "(give W_V other columns than W_K, so that V ≠ K)",
    ]
    assert cli("validate", "--no-notes", str(path))[1] == ""


def _as_value(e):
    """An entry of the exact engine (tutor.exact.engine / exactnum) as an expoly Value, written here from its structure."""
    from tutor.exact.block import Alg
    from tutor.exact.expoly import NEG_INF
    from tutor.exact.numbers import Mix, MixSum, NegInf, Rat, Surd

    if isinstance(e, NegInf):
        return NEG_INF
    if isinstance(e, Alg):  # an entry after a norm: it holds its expoly Value
        return e.v
    if isinstance(e, Rat):
        return Value.of(e.q)
    if isinstance(e, Surd):
        return Value.of(e.q, e.t)
    if isinstance(e, Mix):
        row = e.row
        power = {j: Poly.exp(surds([(row.t, Fraction(row.nums[j], row.den))])) for j in row.live}
        den = Poly()
        num = Poly()
        for j in row.live:
            den = den + power[j]
            num = num + power[j].scale(Fraction(e.cnums[j], e.cden))
        return Value.ratio(num, den)
    assert isinstance(e, MixSum)
    total = Value.of(e.const)
    for part in e.parts:
        total = total + _as_value(part)
    return total


def _root(n: int) -> tuple[int, int]:
    """``√n = s·√t``, ``t`` square-free, by trial division (``n ≥ 1``)."""
    s, t, p = 1, n, 2
    while p * p <= t:
        while t % (p * p) == 0:
            t //= p * p
            s *= p
        p += 1
    return s, t


def _block_by_hand(ex) -> dict:
    """The pre-norm block's steps as expoly Values, written out here: each row of X less its mean
    (LayerNorm) over ``√(mean of squares + eps)`` (``1/√(p/q) = s·√t/p`` with ``q·p = s²·t``), the
    projections, ``Q·Kᵀ``, times ``1/√d_k``, the mask, ``exp(a_j)/Σ exp(a_l)``, weights·V, the concat,
    ``W_O`` and ``X +``.  Exercises without a bias and without K/V inputs of their own."""
    from tutor.exact.expoly import NEG_INF

    def mat(m):
        return [[Value.of(x) for x in row] for row in m]

    def mul(a, b):  # [n, m]·[m, p] -> [n, p]
        out = []
        for row in a:
            out.append([])
            for j in range(len(b[0])):
                acc = Value.of(0)
                for x, brow in zip(row, b):
                    acc = acc + x * brow[j]
                out[-1].append(acc)
        return out

    xn = []
    for row in ex.x:
        mean = sum(row, Fraction(0)) / len(row) if ex.norm == "layernorm" else Fraction(0)
        c = [x - mean for x in row]
        m = sum((x * x for x in c), Fraction(0)) / len(c) + ex.norm_eps
        s, t = _root(m.numerator * m.denominator)
        xn.append([Value.of(x * Fraction(s, m.numerator), t) for x in c])
    out = {("x_norm", None): xn}
    allowed = ex.allowed()
    heads = []
    for h, hd in enumerate(ex.heads):
        q, k, v = (mul(xn, mat(w)) for w in (hd.w_q, hd.w_k, hd.w_v))
        scores = mul(q, [list(col) for col in zip(*k)])
        s, t = _root(hd.d_k)
        scaled = [[e * Value.of(Fraction(s, hd.d_k), t) for e in row] for row in scores]  # 1/√d_k = s·√t/d_k
        out.update({("q", h): q, ("k", h): k, ("v", h): v, ("scores", h): scores, ("scaled", h): scaled})
        if allowed is not None:
            scaled = [[e if ok else NEG_INF for e, ok in zip(row, oks)] for row, oks in zip(scaled, allowed)]
            out["masked", h] = scaled
        weights = []
        for row in scaled:
            live = [e.constant() for e in row if e is not NEG_INF]
            den = Poly()
            for a in live:
                den = den + Poly.exp(a)
            weights.append([Value.of(0) if e is NEG_INF else Value.ratio(Poly.exp(e.constant()), den) for e in row])
        out["weights", h] = weights
        out["head_output", h] = mul(weights, v)
        heads.append(out["head_output", h])
    concat = [sum((hrows[i] for hrows in heads), []) for i in range(len(ex.x))]
    if len(heads) > 1:
        out["concat", None] = concat
    output = mul(concat, mat(ex.w_o)) if ex.w_o is not None else concat
    out["output", None] = output
    if ex.residual:
        out["residual", None] = [[Value.of(x) + e for x, e in zip(xr, orow)] for xr, orow in zip(ex.x, output)]
    return out


@pytest.mark.parametrize("exercise_id", sorted(ex.id for ex in bundled()))
def test_the_exact_walk_is_the_exact_engine(exercise_id):
    """Under no misconception, the exact walk gives, entry by entry, exactly the exact engine's values."""
    from tutor.exact.expoly import NEG_INF
    from tutor.exact.matrices import as_value

    ex = resolve(exercise_id)
    if ex.has_cache or ex.has_bias or ex.rope is not None:  # format v2's cache and bias, v3's RoPE: no exact walk
        with pytest.raises(NoExactForm):
            exact_replay(ex, RIGHT)
        return
    walked = exact_replay(ex, RIGHT)
    # after a norm, solve's entries are the exact walk's own (tutor.steps.catalogue._solve_normed): the other
    # engine is then the block written out below, exactly, from the exercise's numbers
    if ex.has_norm:
        other = _block_by_hand(ex)
    else:  # post-norm's out_norm has no exact walk (tests/test_postnorm.py checks it at 60 digits)
        other = {s.key: [[_as_value(b) for b in row] for row in s.exact] for s in solve(ex).steps if s.id != "out_norm"}
    assert set(other) == set(walked), exercise_id
    for key, rows in other.items():
        assert len(walked[key]) == len(rows), (exercise_id, key)
        for row_a, row_b in zip(walked[key], rows):
            assert len(row_a) == len(row_b), (exercise_id, key)
            for a, b in zip(row_a, row_b):
                if a is NEG_INF or b is NEG_INF:
                    assert a is b, (exercise_id, key)
                else:
                    assert as_value(a).equals(b) == (True, True), (exercise_id, key)


# --- work bounded by the size of the numbers (issue 20, A) ----------------------------------------------


def _long_numbers(tmp_path):
    """The issue's input: 8 tokens, d_model = 8, two heads of d_k = 4, W_O, every entry of x and of the
    weights a 14-digit integer over 999999999999999999999989 (inside every limit of the format)."""
    import random

    from tutor.exercise import load_exercise

    rng = random.Random(1)
    D = "999999999999999999999989"

    def m(r: int, c: int) -> str:
        return "[" + ", ".join("[" + ", ".join(f"{rng.randint(10**13, 10**14 - 1) * rng.choice([1, -1])}/{D}"
                                              for _ in range(c)) + "]" for _ in range(r)) + "]"

    heads = "\n".join(f"  - w_q: {m(8, 4)}\n    w_k: {m(8, 4)}\n    w_v: {m(8, 4)}" for _ in range(2))
    path = tmp_path / "long.yaml"
    path.write_text(f"id: long-numbers\ntitle: long numbers\nx: {m(8, 8)}\nheads:\n{heads}\nw_o: {m(8, 8)}\n")
    return load_exercise(str(path))


def test_the_exact_walk_is_bounded_by_the_size_of_the_numbers(tmp_path, monkeypatch):
    """Every unit of exact work is counted against one budget per exercise, and past it the floats decide:
    the work done is at most the budget (and one operation's worth), however long the numbers."""
    from tutor.exact import expoly

    charged: list[int] = []
    real = expoly.charge

    refused: list[int] = []

    def counting(units: int) -> None:
        try:
            real(units)  # raises TooLarge before the work is done when the budget cannot pay for it
        except expoly.TooLarge:
            refused.append(units)
            raise
        charged.append(units)

    monkeypatch.setattr(expoly, "charge", counting)
    sol = solve(_long_numbers(tmp_path))
    found = invisible(sol)
    assert sum(charged) <= expoly.MAX_WORK  # the budget held: no work done past it
    assert refused  # it did run out: long numbers are more work than it allows
    assert any(not f.exact for f in found)  # ... so some verdicts are the floats', and say so


def test_a_verdict_by_the_floats_is_not_fooled_by_tiny_numbers(tmp_path):
    """Long numbers here are also tiny (1e-10): a float comparison at a fixed scale would call every
    mistake invisible; compared at the step's own float64 error bound, the classic mistakes show, and
    what float64 cannot tell apart is said to be decided by the floats."""
    sol = solve(_long_numbers(tmp_path))
    hidden = {(f.key, f.step[0]) for f in invisible(sol, CORE)}
    assert ("w_o_transposed", "output") not in hidden and ("times_k", "head_output") not in hidden
    assert ("heads_order", "concat") not in hidden and ("kq_transposed", "scores") not in hidden
    assert all("not decided exactly" in text for texts in notes(sol).values() for text in texts)


def test_a_mistake_that_cannot_change_a_step_is_not_said_to_be_invisible_there():
    """Cut weights (``truncated_weights``) change the head output, never the masked scores or the weights:
    a mistake is listed only where its knobs reach (a rounded input counts where it is read)."""
    from tutor.steps import varies

    ex = resolve("two-head-causal-3x4")
    assert "round_weights" not in varies(ex, ("weights", 0)) and "round_weights" in varies(ex, ("head_output", 0))
    assert "round_scaled" in varies(ex, ("masked", 0)) and "round_scaled" not in varies(ex, ("weights", 0))
    found = {(f.key, f.step[0]) for f in invisible(solve(ex))}
    assert not {("truncated_weights", "masked"), ("truncated_weights", "weights")} & found


def test_a_backward_mistake_is_suggested_with_backward():
    """The note at a gradient step suggests the other exercise's backward pass (--backward): forward-only, the
    mistake is never made there. A forward step's note stays as it was."""
    from tutor.base.messages import Msg
    from tutor.mistakes.invisible import in_backward, note, suggestion
    from tutor.steps import solve

    assert in_backward("d_q") and in_backward("d_output") and not in_backward("scores") and not in_backward("tiled")
    found = suggestion("grad_no_scale", "d_q", "single-head-3x4")
    assert found is not None
    sol = solve(resolve("single-head-3x4"), backward=True)
    said = note(sol, "grad_no_scale", ("d_q", 0), found)
    assert isinstance(said, Msg)
    assert f"Try the backward pass of `{found}` (--backward) to be tested on it." in str(said)
    forward = note(sol, "no_scaling", ("scaled", 0), "single-head-asym-3x4")
    assert "Try `single-head-asym-3x4` to be tested on it." in str(forward) and "--backward" not in str(forward)


ROPE_DECODE = """\
id: rope-decode
title: "RoPE decode step"
past_tokens: [The, cat, sat]
cache:
  - k: [[1, 0], [0, 1], [1, 1]]
    v: [[-1, 1], [1, 0], [0, 1]]
tokens: ["on"]
x: [[1, 1]]
heads:
  - w_q: [[1, 0], [0, 1]]
    w_k: [[1, 1], [0, 1]]
    w_v: [[1, 0], [0, 1]]
mask: causal_lower_right
rope: {base: 10000, pairing: interleaved}
"""


def test_rotating_v_in_a_decode_step_is_modelled_and_caught(cli, tmp_path):
    """With a KV cache, V = [V_cache; V_new]: rotating V turns the new row at its position (3 here), as k_rot turns
    the new key. The trial found the cached path returned before the mistake was modelled, so validate said it
    could not be caught. V_new = x·W_V = [1, 1] turned by 3 rad: [cos 3 − sin 3, sin 3 + cos 3], by hand."""
    from tutor.mistakes.diagnose import diagnose
    from tutor.mistakes.invisible import VALIDATED, invisible
    from tutor.steps import Variant, replay, solve

    ex = parse_exercise(ROPE_DECODE, "rope-decode.yaml")
    wrong = replay(ex, Variant(rope="rotate_v")).values[("v", 0)]
    c, s = math.cos(3), math.sin(3)
    assert np.allclose(wrong, [[-1, 1], [1, 0], [0, 1], [c - s, s + c]], atol=1e-12)  # the cache's rows as stored
    sol = solve(ex)
    assert np.allclose(sol.step("v", 0).value, [[-1, 1], [1, 0], [0, 1], [1, 1]])
    assert "rope_v_rotated" not in {f.key for f in invisible(sol, VALIDATED)}
    got = [d.key for d in diagnose(sol, "v", 0, wrong.tolist(), tolerance=1e-6)]
    assert got[:1] == ["rope_v_rotated"], got
    path = tmp_path / "rope-decode.yaml"
    path.write_text(ROPE_DECODE, encoding="utf-8")
    code, out, err = cli("validate", str(path))
    assert code == 0, err
    assert "rotating V" not in out


def test_every_suggestion_names_an_exercise_where_the_mistake_can_be_made_and_shows():
    """Issue 24 trial, F6: "mask applied in the scaled step" suggested single-head-dk4-2x4, which has no mask (the
    special row carried no ``needs``, and a mistake with no value on an exercise was counted caught there); √d_k
    rounded was suggested on d_k = 4, a perfect square.  Over the whole catalogue: the exercise suggested for a
    mistake at a step meets the mistake's needs, and at a step of that id there the mistake's own value (NumPy,
    compared here) differs from the right one -- a judge's mistake, which has no one value, at least applies."""
    from tutor.base.errors import TutorError
    from tutor.mistakes.diagnose import needs_met
    from tutor.mistakes.invisible import learning_order, origins, suggestion

    def solved(ex):
        try:
            return solve(ex, backward=True), True
        except TutorError:  # the pre-norm block's and MLA's backward pass are refused
            return solve(ex, backward=False), False

    sols = {ex.id: solved(ex) for ex in learning_order()}
    checked, wrong = 0, []
    for m in MISCONCEPTIONS:
        made_at = {k[0] for sol, bw in sols.values() if needs_met(sol, m.needs) for k in origins(m, sol.exercise, bw)}
        for step_id in sorted(made_at):
            found = suggestion(m.key, step_id, "")
            if found is None:
                continue
            sol, bw = sols[found]
            at = [k for k in origins(m, sol.exercise, bw) if k[0] == step_id]
            shows = m.judge is not None and bool(at)
            for k in at if m.judge is None else ():
                right = np.array(sol.step(*k).value, dtype=np.float64)  # [rows, cols]
                with np.errstate(all="ignore"):
                    values = [got for _, got in m.candidates(sol, *k)]
                shows |= any(v.shape != right.shape or not np.allclose(v, right, rtol=1e-6, atol=1e-9) for v in values)
            checked += 1
            if not needs_met(sol, m.needs) or not shows:
                wrong.append((m.key, step_id, found))
    assert checked > 100 and not wrong
    assert suggestion("mask_in_scaled", "scaled", "two-head-causal-3x4") is not None
    assert resolve(suggestion("mask_in_scaled", "scaled", "two-head-causal-3x4")).has_mask
