"""The misconception catalogue: every misconception recognised from a wrong
answer made by hand in the test (plain Python arithmetic written here, never
the pipeline under test), at the step where it happens and at later steps.

Hand-made exercise E (d_model = 3, d_k = 2, a mask), worked on paper:
    Q = [[2, 1], [0, 1], [1, 1]]   K = [[2, 1], [0, 1], [1, 2]]   V = [[4, 2], [0, 1], [1, 3]]
    scores = Q Kᵀ = [[5, 1, 4], [1, 1, 2], [3, 1, 3]]
The classic single-head-3x4: Q = K = V = [[1, 1], [2, 2], [2, 2]], scores
[[2, 4, 4], [4, 8, 8], [4, 8, 8]], d_k = 2.
"""

from __future__ import annotations

import math

import pytest

from tutor.base.messages import EN
from tutor.exercise import exercise_from_data
from tutor.exercise.catalog import resolve
from tutor.mistakes.diagnose import MISCONCEPTIONS, Diagnosis, diagnose, wrong_cells
from tutor.steps import solve

INF = math.inf
TOL = 0.005


# --- an independent oracle: plain Python, no numpy ------------------------------------


def mm(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def tr(a):
    return [list(r) for r in zip(*a)]


def scale(a, f):
    return [[x * f for x in r] for r in a]


def softmax_row(r):
    live = [x for x in r if x != -INF]
    if not live:
        return [0.0] * len(r)
    z = sum(math.exp(x) for x in live)
    return [0.0 if x == -INF else math.exp(x) / z for x in r]


def softmax_rows(a):
    return [softmax_row(r) for r in a]


def where(ok, a, other):
    return [[a[i][j] if ok[i][j] else other for j in range(len(a[0]))] for i in range(len(a))]


def rnd(a, p):
    return [[round(x, p) for x in r] for r in a]


def keys(ds: list[Diagnosis]) -> list[str]:
    return [d.key for d in ds]


T, F = True, False
E_MASK = [[T, F, T], [T, T, F], [F, T, T]]
E_DATA = {
    "id": "hand-e", "title": "E",
    "x": [[1, 0, 1], [0, 1, 0], [1, 1, 0]],
    "heads": [{"w_q": [[1, 0], [0, 1], [1, 1]], "w_k": [[1, 1], [0, 1], [1, 0]], "w_v": [[1, 2], [0, 1], [3, 0]]}],
}
Q = [[2, 1], [0, 1], [1, 1]]
K = [[2, 1], [0, 1], [1, 2]]
V = [[4, 2], [0, 1], [1, 3]]
S = [[5, 1, 4], [1, 1, 2], [3, 1, 3]]
R2 = math.sqrt(2)


@pytest.fixture(scope="module")
def e():
    return solve(exercise_from_data(E_DATA))


@pytest.fixture(scope="module")
def em():
    return solve(exercise_from_data({**E_DATA, "mask": E_MASK}))


@pytest.fixture(scope="module")
def classic():
    return solve(resolve("single-head-3x4"))


def test_hand_values_of_e(e):
    assert [[float(x) for x in r] for r in e.step("q", 0).value] == Q
    assert [[float(x) for x in r] for r in e.step("k", 0).value] == K
    assert [[float(x) for x in r] for r in e.step("v", 0).value] == V
    assert [[float(x) for x in r] for r in e.step("scores", 0).value] == S


# --- scaling ---------------------------------------------------------------------------


def test_no_scaling_at_scaled_weights_and_output(classic):
    scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]
    d = diagnose(classic, "scaled", 0, scores, tolerance=TOL)
    assert d == [Diagnosis("no_scaling", "You forgot to divide by √d_k: scaled = scores / √2.",
                           tuple((i, j) for i in range(3) for j in range(3)))]
    # weights from unscaled scores, row 1: e^2 / (e^2 + 2 e^4) = 0.0634, written to 2 places
    w = softmax_rows(scores)
    assert round(w[0][0], 4) == 0.0634
    assert keys(diagnose(classic, "weights", 0, rnd(w, 2), tolerance=TOL)) == ["no_scaling"]
    out = mm(w, [[1, 1], [2, 2], [2, 2]])
    assert keys(diagnose(classic, "head_output", 0, rnd(out, 3), tolerance=TOL)) == ["no_scaling"]


def test_scale_by_sqrt_d_model(e):
    ans = scale(S, 1 / math.sqrt(3))
    d = diagnose(e, "scaled", 0, rnd(ans, 3), tolerance=TOL)
    # L = L_k = d_model = 3 in E: the answer cannot tell √d_model from √L, so both are named
    assert keys(d) == ["scale_sqrt_d_model", "scale_constant"]
    assert d[0].message == ("You divided by √d_model = √3; divide by √d_k of the head instead: "
                            "scaled = scores / √2.")
    assert keys(diagnose(e, "weights", 0, rnd(softmax_rows(ans), 3), tolerance=TOL)) == ["scale_sqrt_d_model",
                                                                                         "scale_constant"]


def test_scale_by_one_over_d_k_is_dividing_by_d_k(e):
    ans = [[2.5, 0.5, 2], [0.5, 0.5, 1], [1.5, 0.5, 1.5]]  # S / 2
    d = diagnose(e, "scaled", 0, ans, tolerance=TOL)
    assert keys(d) == ["scale_d_k", "scale_constant"]  # d_v = d_out = 2 = d_k in E: each is named
    assert d[0].message == "You divided by d_k = 2 instead of its square root: scaled = scores / √2."
    assert "by d_v = d_out = 2" in d[1].message
    assert keys(diagnose(e, "head_output", 0, mm(softmax_rows(ans), V), tolerance=TOL)) == ["scale_d_k", "scale_constant"]


def test_scale_by_d_k_is_multiplying_by_d_k(e):
    ans = [[10, 2, 8], [2, 2, 4], [6, 2, 6]]  # S * 2
    assert keys(diagnose(e, "scaled", 0, ans, tolerance=TOL)) == ["scale_times_d_k"]
    assert keys(diagnose(e, "weights", 0, softmax_rows(ans), tolerance=TOL)) == ["scale_times_d_k"]


def test_scale_times_sqrt_d_k(e):
    ans = scale(S, R2)
    assert keys(diagnose(e, "scaled", 0, rnd(ans, 2), tolerance=TOL)) == ["scale_times_sqrt_d_k"]


def test_kq_instead_of_qk():
    sol = solve(resolve("cross-attention-2x3"))
    # Q = x W_Q = [[1, 0], [0, 1]]; K = x_kv W_K = [[1, 0], [0, 1], [1, 1]]: K Qᵀ is [3×2]
    kq = [[1, 0], [0, 1], [1, 1]]
    d = diagnose(sol, "scores", 0, kq, tolerance=TOL)
    assert keys(d) == ["kq_transposed"]  # K·Qᵀ is (Q·Kᵀ)ᵀ: the named mistake says it, "transposed" is not repeated
    assert d[0].message == "You computed K·Qᵀ instead of Q·Kᵀ: scores = Q·Kᵀ, one row per query and one column per key."
    assert d[0].cells == ()
    # and carried into the weights: softmax of (K Qᵀ)/√2 along rows, [3×2]
    w = softmax_rows(scale(kq, 1 / R2))
    assert keys(diagnose(sol, "weights", 0, rnd(w, 2), tolerance=TOL)) == ["kq_transposed"]


# --- masks -------------------------------------------------------------------------------


def test_mask_inverted(em):
    a = scale(S, 1 / R2)
    inverted = where([[not x for x in r] for r in E_MASK], a, -INF)
    assert keys(diagnose(em, "masked", 0, rnd(inverted, 3), tolerance=TOL)) == ["mask_inverted"]
    assert keys(diagnose(em, "weights", 0, rnd(softmax_rows(inverted), 3), tolerance=TOL)) == ["mask_inverted"]


def test_mask_zero_instead_of_minus_inf(em):
    a = scale(S, 1 / R2)
    zeroed = where(E_MASK, a, 0.0)
    d = diagnose(em, "masked", 0, rnd(zeroed, 3), tolerance=TOL)
    assert keys(d) == ["mask_zero"]
    assert d[0].cells == ((0, 1), (1, 2), (2, 0))
    assert keys(diagnose(em, "weights", 0, rnd(softmax_rows(zeroed), 3), tolerance=TOL)) == ["mask_zero"]


def test_mask_after_softmax_without_renormalising(em):
    w = where(E_MASK, softmax_rows(scale(S, 1 / R2)), 0.0)
    assert keys(diagnose(em, "weights", 0, rnd(w, 3), tolerance=TOL)) == ["mask_after_softmax"]
    assert keys(diagnose(em, "head_output", 0, rnd(mm(w, V), 3), tolerance=TOL)) == ["mask_after_softmax"]


def test_mask_forgotten(em):
    a = scale(S, 1 / R2)
    assert keys(diagnose(em, "masked", 0, rnd(a, 3), tolerance=TOL)) == ["no_mask"]
    w = softmax_rows(a)
    assert keys(diagnose(em, "weights", 0, rnd(w, 3), tolerance=TOL)) == ["no_mask"]


def test_diagnose_doctest():
    import doctest

    import tutor.mistakes.diagnose

    assert doctest.testmod(tutor.mistakes.diagnose).failed == 0


def test_key_padding_on_rows_instead_of_columns():
    sol = solve(resolve("padding-4x2"))
    # Q = x = [[1,0],[0,1],[1,1],[0,0]]; K = x + b_k = [[1,1],[0,2],[1,2],[0,1]]; PAD is token 4.
    q = [[1, 0], [0, 1], [1, 1], [0, 0]]
    k = [[1, 1], [0, 2], [1, 2], [0, 1]]
    a = scale(mm(q, tr(k)), 1 / R2)
    rows_masked = [r if i < 3 else [-INF] * 4 for i, r in enumerate(a)]  # the PAD row, not the PAD column
    d = diagnose(sol, "masked", 0, rnd(rows_masked, 3), tolerance=TOL)
    assert keys(d) == ["padding_rows"]
    assert str(d[0].message).startswith("You applied the key padding to query rows")
    w = softmax_rows(rows_masked)
    assert w[3] == [0.0] * 4
    assert keys(diagnose(sol, "weights", 0, rnd(w, 3), tolerance=TOL)) == ["padding_rows"]


# --- softmax --------------------------------------------------------------------------------


def test_softmax_over_columns(e):
    a = scale(S, 1 / R2)
    w = tr(softmax_rows(tr(a)))
    d = diagnose(e, "weights", 0, rnd(w, 2), tolerance=TOL)
    assert keys(d) == ["softmax_columns"]
    assert d[0].message == ("You took the softmax down each column; take it along each row (over the keys), "
                            "so that each row of weights with a key to attend sums to 1.")


def test_exp_not_normalised(e):
    w = [[math.exp(x / R2) for x in r] for r in S]
    assert keys(diagnose(e, "weights", 0, rnd(w, 3), tolerance=TOL)) == ["not_normalised"]


def test_scaled_scores_rounded_too_early(classic):
    a = rnd(scale([[2, 4, 4], [4, 8, 8], [4, 8, 8]], 1 / R2), 2)  # [[1.41, 2.83, 2.83], [2.83, 5.66, 5.66], ...]
    assert a[0] == [1.41, 2.83, 2.83]
    w = softmax_rows(a)
    right = softmax_rows(scale([[2, 4, 4], [4, 8, 8], [4, 8, 8]], 1 / R2))
    assert max(abs(w[i][j] - right[i][j]) for i in range(3) for j in range(3)) > 2e-4
    assert keys(diagnose(classic, "weights", 0, rnd(w, 5), tolerance=1e-5)) == ["rounded_scaled"]


def test_weights_rounded_too_early(e):
    w = rnd(softmax_rows(scale(S, 1 / R2)), 2)
    out = mm(w, V)
    d = diagnose(e, "head_output", 0, rnd(out, 4), tolerance=1e-4)
    assert keys(d) == ["rounded_weights"]
    assert d[0].message == ("You rounded the weights to 2 decimals before multiplying by V; "
                            "keep full precision until the final answer.")


# --- outputs ----------------------------------------------------------------------------------


def test_weights_times_k(e):
    w = softmax_rows(scale(S, 1 / R2))
    d = diagnose(e, "head_output", 0, rnd(mm(w, K), 2), tolerance=TOL)
    assert keys(d) == ["times_k"]
    assert d[0].message == "You multiplied the weights by K; the head output is weights·V."


def test_heads_concatenated_in_wrong_order():
    sol = solve(resolve("two-head-dk1-3x4"))
    h0 = [list(r) for r in sol.step("head_output", 0).value]
    h1 = [list(r) for r in sol.step("head_output", 1).value]
    wrong = [b + a for a, b in zip(h0, h1)]  # [head_2, head_1]
    d = diagnose(sol, "concat", None, rnd(wrong, 3), tolerance=TOL)
    assert keys(d) == ["heads_order"]
    assert str(d[0].message).startswith("You concatenated the heads in the wrong order")


def test_missing_biases():
    sol = solve(resolve("two-head-fused-3x4"))
    x = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
    w_q1 = [[0, 1], [1, 0], [1, 0], [0, 1]]  # columns 2-3 of the fused w_q; head 1 has b_q = [1, 0]
    d = diagnose(sol, "q", 1, mm(x, w_q1), tolerance=TOL)
    assert keys(d) == ["no_b_q"] and d[0].message == "You left out the bias b_Q: Q = X·W_Q + b_Q."
    w_v0 = [[1, 0], [0, 1], [0, 0], [0, 0]]  # head 0 has b_v = [0.5, 0]
    assert keys(diagnose(sol, "v", 0, mm(x, w_v0), tolerance=TOL)) == ["no_b_v"]
    out = [list(r) for r in sol.step("output", None).value]
    no_b_o = [r[:3] + [r[3] - 1] for r in out]  # b_o = [0, 0, 0, 1]
    d = diagnose(sol, "output", None, rnd(no_b_o, 3), tolerance=TOL)
    assert keys(d) == ["no_b_o"]
    assert d[0].cells == ((0, 3), (1, 3), (2, 3))
    pad = solve(resolve("padding-4x2"))  # b_k = [0, 1]; w_k = I, so K without it is x
    assert keys(diagnose(pad, "k", 0, [[1, 0], [0, 1], [1, 1], [0, 0]], tolerance=TOL)) == ["no_b_k"]


def test_missing_bias_propagates_to_scores():
    pad = solve(resolve("padding-4x2"))
    q = [[1, 0], [0, 1], [1, 1], [0, 0]]
    assert keys(diagnose(pad, "scores", 0, mm(q, tr(q)), tolerance=TOL)) == ["no_b_k"]


# --- generic ---------------------------------------------------------------------------------------


def test_transposed_answer(e):
    d = diagnose(e, "scores", 0, tr(S), tolerance=TOL)
    assert keys(d) == ["kq_transposed"]  # for scores K Qᵀ is (Q Kᵀ)ᵀ: the named mistake, not "transposed" besides
    w = softmax_rows(scale(S, 1 / R2))
    d = diagnose(e, "weights", 0, rnd(tr(w), 3), tolerance=TOL)
    assert keys(d) == ["transposed"]
    # a square matrix transposed keeps its shape: "write it as [3×3]" would ask for what it already is (issue 20, E)
    assert d[0].message == ("Your weights matrix is transposed: your rows are its columns. It is square, so the shape"
                            " stays [3×3]; swap rows and columns (entry (i, j) goes to (j, i)).")
    d = diagnose(e, "v", 0, tr(V), tolerance=TOL)  # V is [3×2]: its transpose [2×3] has another shape, named
    assert keys(d) == ["transposed"]
    assert d[0].message == "Your V matrix is transposed; write it as [3×2], swapping rows and columns."


def test_single_wrong_entry_points_at_the_products(classic):
    d = diagnose(classic, "scores", 0, [[2, 5, 4], [4, 8, 8], [4, 8, 8]], tolerance=TOL)
    assert d == [Diagnosis("single_entry", "scores[t1, t2] should be Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4; you wrote 5.", ((0, 1),))]
    d = diagnose(classic, "q", 0, [[1, 1], [2, 3], [2, 2]], tolerance=TOL)
    assert d[0].message == "Q[t2, d2] should be X[t2, :]·W_Q[:, d2] = 0·0 + 2·0 + 0·1 + 2·1 = 2; you wrote 3."
    d = diagnose(classic, "scaled", 0, [[1.41, 2.83, 2.83], [2.83, 5.66, 5.66], [2.83, 5.66, 5.0]], tolerance=TOL)
    assert d[0].message == "scaled[t3, t3] should be scores[t3, t3] / sqrt(2) = 8 / sqrt(2) = 4*sqrt(2) ≈ 5.6569; you wrote 5."
    d = diagnose(classic, "weights", 0, [[0.11, 0.45, 0.45], [0.03, 0.49, 0.49], [0.03, 0.49, 0.40]], tolerance=TOL)
    assert d[0].message == ("weights[t3, t3] should be exp(scaled[t3, t3]) / Σ_k exp(scaled[t3, k]) = "
                            "exp(5.6569) / (exp(2.8284) + exp(5.6569) + exp(5.6569)) = "
                            "286.2468 / (16.9188 + 286.2468 + 286.2468) ≈ 0.4856; you wrote 0.4.")
    assert d[0].cells == ((2, 2),)


def test_single_wrong_entry_with_bias_heads_and_output_projection():
    sol = solve(resolve("two-head-fused-3x4"))
    # V head 0 = x W_V + b_V, b_V = [1/2, 0]: V[t1, d1] = 1·1 + 0·0 + 1·0 + 0·0 + 1/2 = 3/2
    v = [list(r) for r in sol.step("v", 0).value]
    assert v[0][0] == 1.5
    v[0][0] = 2.5
    d = diagnose(sol, "v", 0, v, tolerance=TOL)
    assert d[0].message == "V[t1, d1] should be X[t1, :]·W_V[:, d1] + b_V[d1] = 1·1 + 0·0 + 1·0 + 0·0 + (1/2) = 3/2; you wrote 2.5."
    c = [list(r) for r in sol.step("concat", None).value]
    c[1][2] += 1
    d = diagnose(sol, "concat", None, rnd(c, 4), tolerance=TOL)
    assert str(d[0].message).startswith("concat[t2, h2.d1] should be head_2[t2, d1] ≈ ")
    big = solve(exercise_from_data({"id": "neg", "title": "n", "x": [[-1, 2]],
                                    "heads": [{"w_q": [[-3], [1]], "w_k": [[1], [1]], "w_v": [[1], [1]]}]}))
    d = diagnose(big, "q", 0, [[4]], tolerance=TOL)  # (-1)·(-3) + 2·1 = 5
    assert d[0].message == "Q[t1, d1] should be X[t1, :]·W_Q[:, d1] = (-1)·(-3) + 2·1 = 5; you wrote 4."


def test_single_wrong_masked_entry(em):
    a = rnd(where(E_MASK, scale(S, 1 / R2), -INF), 3)
    a[0][0] = 1.0
    d = diagnose(em, "masked", 0, a, tolerance=TOL)
    assert d[0].message == ("masked[t1, t1] should be scaled[t1, t1] + 0 = 5*sqrt(2)/2 ≈ 3.5355  "
                            "(query t1 may attend to key t1); you wrote 1.")
    a = rnd(where(E_MASK, scale(S, 1 / R2), -INF), 3)
    a[0][1] = 0.7
    d = diagnose(em, "masked", 0, a, tolerance=TOL)
    assert d[0].message == "masked[t1, t2] should be scaled[t1, t2] + (-inf) = -inf  (query t1 may not attend to key t2); you wrote 0.7."


def test_right_answer_and_unexplained_answer_give_nothing(classic):
    right = [list(r) for r in classic.step("weights", 0).value]
    assert diagnose(classic, "weights", 0, rnd(right, 2), tolerance=TOL) == []
    assert diagnose(classic, "weights", 0, [[0.5, 0.25, 0.25]] * 3, tolerance=TOL) == []


def test_a_misconception_that_changes_nothing_explains_nothing(classic):
    # classic has no bias, no mask and Q = K: transposing the scores changes nothing
    d = diagnose(classic, "scores", 0, [[2, 4, 4], [4, 8, 9], [4, 8, 8]], tolerance=TOL)
    assert keys(d) == ["single_entry"]


def test_minus_inf_matches_only_minus_inf(em):
    a = rnd(where(E_MASK, scale(S, 1 / R2), -1e9), 3)  # a big negative number is not -inf
    assert "mask_zero" not in keys(diagnose(em, "masked", 0, a, tolerance=TOL))
    assert wrong_cells(em, "masked", 0, a, tolerance=TOL) == [(0, 1), (1, 2), (2, 0)]


def test_wrong_cells(classic):
    assert wrong_cells(classic, "scores", 0, [[2, 5, 4], [4, 8, 8], [4, 8, 7]], tolerance=TOL) == [(0, 1), (2, 2)]
    assert wrong_cells(classic, "scores", 0, [[2, 4, 4], [4, 8, 8], [4, 8, 8]], tolerance=TOL) == []
    assert wrong_cells(classic, "scores", 0, [[2, 4], [4, 8]], tolerance=TOL) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_unknown_step_and_ragged_answer(classic):
    with pytest.raises(KeyError):
        diagnose(classic, "masked", 0, [[1]], tolerance=TOL)
    with pytest.raises(ValueError):
        diagnose(classic, "scores", 0, [[1, 2], [3]], tolerance=TOL)


# --- the output projection, the softmax, fully masked rows, the mask too early ----------------------


def test_output_projection_with_w_o_transposed():
    # E (no mask) with a square W_O that is not symmetric, and a bias: output = head_1·W_O + b_O
    w_o, b_o = [[1, 2], [0, 1]], [1, -1]
    sol = solve(exercise_from_data({**E_DATA, "w_o": w_o, "b_o": b_o}))
    head = mm(softmax_rows(scale(S, 1 / R2)), V)
    right = [[x + b for x, b in zip(r, b_o)] for r in mm(head, w_o)]
    assert max(abs(a - b) for r1, r2 in zip(right, sol.step("output", None).value) for a, b in zip(r1, r2)) < 1e-9
    # nn.Linear's convention read into this file: x·weightᵀ, i.e. head_1·W_Oᵀ + b_O
    wrong = [[x + b for x, b in zip(r, b_o)] for r in mm(head, tr(w_o))]
    d = diagnose(sol, "output", None, rnd(wrong, 3), tolerance=TOL)
    assert keys(d) == ["w_o_transposed"]
    assert d[0].message == ("You multiplied by W_O transposed, as nn.Linear does with its weight stored [d_out, d_in]; "
                            "here W_O is written [d_in, d_out] (one row per column of head_1), so "
                            "output = head_1·W_O + b_O with no transpose.")
    assert d[0].cells == ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1))  # W_O[0][1] = 2 vs 0 moves every entry


def test_w_o_transposed_needs_a_square_w_o():
    (m,) = [m for m in MISCONCEPTIONS if m.key == "w_o_transposed"]
    wide = solve(exercise_from_data({**E_DATA, "w_o": [[1, 0, 1], [0, 1, 1]]}))  # [2×3]: W_Oᵀ does not chain
    assert m.recompute(wide, "output", None) is None
    # the bundled two-head causal exercise has W_O = I: transposing it changes nothing, so it explains
    # no wrong answer there (the recomputed output is the right one)
    eye = solve(resolve("two-head-causal-3x4"))
    right = [list(r) for r in eye.step("output", None).value]
    got = m.recompute(eye, "output", None).tolist()
    assert all(r1 == pytest.approx(r2, abs=1e-12) for r1, r2 in zip(got, right, strict=True))
    assert "w_o_transposed" not in keys(diagnose(eye, "output", None, [r[::-1] for r in right], tolerance=TOL))


def test_softmax_skipped(e, em):
    a = scale(S, 1 / R2)  # the scaled scores, used as they are
    d = diagnose(e, "head_output", 0, rnd(mm(a, V), 3), tolerance=TOL)
    assert keys(d) == ["no_softmax"]
    assert d[0].message == ("You skipped the softmax and used the scaled scores as weights; take exp of each score "
                            "and divide by its row's sum first: weights_ij = exp(s_ij) / Σ_k exp(s_ik), "
                            "then head_output = weights·V.")
    assert keys(diagnose(e, "weights", 0, rnd(a, 3), tolerance=TOL)) == ["no_softmax"]
    # with a mask, a blocked key takes no part: its score counts 0, not -inf (which has no product)
    kept = where(E_MASK, a, 0.0)
    assert keys(diagnose(em, "weights", 0, rnd(kept, 3), tolerance=TOL)) == ["no_softmax"]
    assert keys(diagnose(em, "head_output", 0, rnd(mm(kept, V), 3), tolerance=TOL)) == ["no_softmax"]


# fully-masked-row-3x3 by hand: x = I, so Q = W_Q, K = W_K, V = W_V
FM_Q = [[1, 1], [1, 0], [0, 1]]
FM_K = [[1, 0], [0, 1], [1, 1]]
FM_V = [[1, 0], [0, 1], [1, 1]]
FM_MASK = [[T, T, F], [T, T, T], [F, F, F]]  # query t3 may attend to no key


def test_uniform_weights_on_a_fully_masked_row():
    sol = solve(resolve("fully-masked-row-3x3"))
    assert [[float(x) for x in r] for r in sol.step("q", 0).value] == FM_Q
    assert [[float(x) for x in r] for r in sol.step("k", 0).value] == FM_K
    assert [[float(x) for x in r] for r in sol.step("v", 0).value] == FM_V
    s = mm(FM_Q, tr(FM_K))
    assert s == [[1, 1, 2], [1, 0, 1], [0, 1, 1]]
    w = softmax_rows(where(FM_MASK, scale(s, 1 / R2), -INF))
    assert w[0][:2] == [0.5, 0.5] and w[2] == [0.0, 0.0, 0.0]
    # masked_fill(-1e9) instead of -inf: the softmax of three equal numbers, 1/3 each
    uniform = w[:2] + [[1 / 3] * 3]
    d = diagnose(sol, "weights", 0, rnd(uniform, 4), tolerance=5e-5)
    assert keys(d) == ["empty_row_uniform"]
    assert d[0].cells == ((2, 0), (2, 1), (2, 2))
    assert d[0].message == ("You gave uniform weights (1/3 each) to a query that may attend to no key (t3); its "
                            "weights are all 0 and its output row is 0. Uniform weights are what the softmax gives "
                            "when blocked scores are filled with a large negative number instead of -inf.")
    out = mm(uniform, FM_V)
    assert [round(x, 12) for x in out[2]] == [round(2 / 3, 12)] * 2  # the mean of V's rows
    assert keys(diagnose(sol, "head_output", 0, rnd(out, 4), tolerance=5e-5)) == ["empty_row_uniform"]


def test_uniform_weights_carry_into_the_output_projection():
    base = {"id": "fm", "title": "fm", "x": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "mask": FM_MASK,
            "heads": [{"w_q": FM_Q, "w_k": FM_K, "w_v": FM_V}]}
    w_o = [[1, 0], [1, 1]]
    sol = solve(exercise_from_data({**base, "w_o": w_o}))
    w = softmax_rows(where(FM_MASK, scale(mm(FM_Q, tr(FM_K)), 1 / R2), -INF))
    out = mm(mm(w[:2] + [[1 / 3] * 3], FM_V), w_o)
    assert keys(diagnose(sol, "output", None, rnd(out, 4), tolerance=5e-5)) == ["empty_row_uniform"]
    # an exercise where every query may attend to some key has no such row to get wrong
    (m,) = [m for m in MISCONCEPTIONS if m.key == "empty_row_uniform"]
    assert m.recompute(solve(exercise_from_data({**E_DATA, "mask": E_MASK})), "weights", 0) is None


def test_mask_applied_in_the_scaled_step(e, em):
    early = where(E_MASK, scale(S, 1 / R2), -INF)
    d = diagnose(em, "scaled", 0, rnd(early, 3), tolerance=TOL)
    assert keys(d) == ["mask_in_scaled"]
    assert d[0].cells == ((0, 1), (1, 2), (2, 0))
    assert d[0].message == ("You applied the mask in the scaled step; scaled = scores / √2 at every entry, "
                            "and the blocked entries become -inf only in the next step (masked = scaled + M).")
    # the same matrix is right one step later
    assert diagnose(em, "masked", 0, rnd(early, 3), tolerance=TOL) == []
    (m,) = [m for m in MISCONCEPTIONS if m.key == "mask_in_scaled"]
    assert m.recompute(e, "scaled", 0) is None  # no mask, nothing to apply early


# --- mistakes from published code (issue 10), as practice answers typed by hand ----------------------


def test_a_large_negative_fill_typed_at_the_masked_step(em):
    a = scale(S, 1 / R2)
    d = diagnose(em, "masked", 0, where(E_MASK, rnd(a, 3), -1e9), tolerance=TOL)
    assert keys(d) == ["mask_large_negative"]
    assert d[0].cells == ((0, 1), (1, 2), (2, 0))
    assert "as -1000000000 instead of -inf" in d[0].message
    # -inf is right; a small negative number is no stand-in for -inf
    assert diagnose(em, "masked", 0, where(E_MASK, rnd(a, 3), -INF), tolerance=TOL) == []
    assert "mask_large_negative" not in keys(diagnose(em, "masked", 0, where(E_MASK, rnd(a, 3), -5), tolerance=TOL))


def test_the_mask_added_as_numbers(em):
    a = scale(S, 1 / R2)
    added = [[a[i][j] + (1 if E_MASK[i][j] else 0) for j in range(3)] for i in range(3)]
    assert keys(diagnose(em, "masked", 0, rnd(added, 3), tolerance=TOL)) == ["mask_added"]
    assert keys(diagnose(em, "weights", 0, rnd(softmax_rows(added), 3), tolerance=TOL)) == ["mask_added"]


def test_dropout_typed_as_weights(e):
    w = softmax_rows(scale(S, 1 / R2))
    dropped = [[0.0 if (i + j) % 4 == 0 else x / 0.8 for j, x in enumerate(r)] for i, r in enumerate(w)]  # p = 0.2
    d = diagnose(e, "weights", 0, rnd(dropped, 3), tolerance=TOL)
    assert keys(d) == ["dropout_on"]
    assert d[0].cells == ((0, 0), (2, 2))
    assert "p = 0.2" in d[0].message and "1/(1 - p) = 1.25" in d[0].message
    # zeros alone, the rest unscaled, is no dropout (no factor above 1)
    zeroed = [[0.0 if (i + j) % 4 == 0 else x for j, x in enumerate(r)] for i, r in enumerate(w)]
    assert "dropout_on" not in keys(diagnose(e, "weights", 0, rnd(zeroed, 3), tolerance=TOL))


def test_scores_over_the_square_root_of_l(e):
    d = diagnose(e, "scaled", 0, rnd(scale(S, 1 / math.sqrt(3)), 3), tolerance=TOL)  # L = L_k = d_model = 3
    assert keys(d) == ["scale_sqrt_d_model", "scale_constant"]  # the same number: both named
    assert "the square root of L = L_k = 3" in d[1].message


def test_one_mistake_and_one_slip_on_top(classic):
    w = softmax_rows([[2, 4, 4], [4, 8, 8], [4, 8, 8]])  # no scaling
    typed = rnd(w, 2)
    typed[2][2] = 0.3  # the slip
    d = diagnose(classic, "weights", 0, typed, tolerance=TOL)
    assert keys(d) == ["no_scaling"] and d[0].cells == ((2, 2),)
    assert "every entry but one" in d[0].message and "weights[t3, t3] (you wrote 0.3; this mistake gives 0.4955)" in d[0].message


# --- the catalogue itself ------------------------------------------------------------------------

TESTED = {
    "no_scaling", "scale_sqrt_d_model", "scale_d_k", "scale_times_d_k", "scale_times_sqrt_d_k", "kq_transposed",
    "mask_inverted", "mask_zero", "mask_after_softmax", "no_mask", "padding_rows", "softmax_columns",
    "not_normalised", "rounded_scaled", "rounded_weights", "times_k", "heads_order", "no_b_q", "no_b_k",
    "no_b_v", "no_b_o", "transposed", "w_o_transposed", "no_softmax", "empty_row_uniform", "mask_in_scaled",
    # the backward pass (issue 13): named by check on solution files torch computes, tests/test_backward_check.py
    "softmax_grad_elementwise", "grad_no_scale", "d_k_not_transposed", "masked_grad_leak", "bias_grad_mean",
    "kv_grad_not_summed",  # format v2's backward: tests/test_backward_check.py
    # format v2: tests/test_v2_misconceptions.py
    "kv_tile_order", "decode_top_left", "cache_reprojected", "bias_after_softmax", "alibi_sign",
    # issue 10: tested here by hand (practice answers), and by solution files from torch in tests/test_misconceptions.py
    "mask_large_negative", "mask_added", "scale_constant", "heads_averaged", "heads_split_reshape",
    "heads_merge_reshape", "dropout_on", "truncated_scaled", "truncated_weights",
    # issue 20, C: solution files torch computes, tests/test_named_mistakes.py and tests/test_backward_check.py
    "argmax_weights", "q_prescaled", "scores_prescaled", "scale_root_rounded", "scale_after_softmax",
    "mask_upper", "mask_diagonal", "alibi_shifted", "softmax_grad_diagonal", "d_k_order", "d_k_order_transposed",
    # issue 23: tests/test_masks_v3.py
    "alibi_geometric", "window_wide", "window_narrow", "window_acausal", "sinks_forgotten",
    # issue 23, RoPE: practice (diagnose) and check (solution files) on values torch computes, tests/test_rope.py
    "rope_pairing_mixed", "rope_positions_from_one", "rope_theta_without_two", "rope_v_rotated",
    "uk_untransposed",  # issue 23, MLA: named by check on a solution file worked by hand, tests/test_mla.py
    # issue 23, the pre-norm block: named by check and practice, tests/test_prenorm_block.py
    "norm_columns", "rmsnorm_mean", "residual_forgotten", "residual_normed",
    # issue 23, post-norm: named by practice and check on the bundled exercise, tests/test_postnorm.py
    "postnorm_before_add", "postnorm_columns",
    # issue 23, RoPE's backward pass: named by practice and check, tests/test_rope_backward.py
    "rope_grad_not_unrotated",
    # fix-rope: the two layouts mixed (tests/test_rope.py) and the gradient turned forward (tests/test_rope_backward.py)
    "rope_half_interleaved_angles", "rope_interleaved_half_angles", "rope_grad_turned_forward",
}


def test_every_misconception_has_a_test_and_a_message():
    names = [m.key for m in MISCONCEPTIONS]
    assert len(names) == len(set(names))
    assert set(names) == TESTED
    for m in MISCONCEPTIONS:
        assert m.message in EN
        assert EN[m.message].endswith(".")
    assert "diagnose.single_entry" in EN


def test_every_misconception_can_show_up_at_some_step():
    """A variant's knobs are read by some step kind, or change a step as it is read (a rounding), else
    it could never be recognised; ``truncate`` only with a rounding; a misconception that is not a
    variant names real steps."""
    from tutor.steps import CATALOGUE, STEP_IDS
    from tutor.steps.state import READ_KNOBS

    read = set().union(*(k.varies for k in CATALOGUE), *READ_KNOBS.values())
    for m in MISCONCEPTIONS:
        if m.variant is None:
            assert m.steps and set(m.steps) <= set(STEP_IDS), m.key
        else:
            turned = m.variant.turned()
            assert turned and turned - {"truncate"} <= read, m.key
            assert "truncate" not in turned or turned & {"round_scaled", "round_weights"}, m.key


def test_where_a_misconception_applies_follows_the_step_graph():
    """no_scaling turns the scale, so it applies from `scaled` on, and not to Q, K, V or the scores."""
    ex = resolve("two-head-causal-3x4")
    m = next(m for m in MISCONCEPTIONS if m.key == "no_scaling")
    got = {key for key in [(s, h) for h in (0, 1) for s in ("q", "k", "v", "scores", "scaled", "masked", "weights",
                                                           "head_output")] + [("concat", None), ("output", None)]
           if m.applies(ex, key)}
    assert got == {(s, h) for h in (0, 1) for s in ("scaled", "masked", "weights", "head_output")} | {
        ("concat", None), ("output", None)}


def test_no_scaling_carries_into_concat_and_output_of_every_head():
    sol = solve(resolve("two-head-causal-3x4"))
    # by hand from the exercise: per-head Q, K, V (fused columns 0-1 and 2-3), causal mask, W_O = I
    qs = [[[2, 0], [0, 4], [2, 2]], [[0, 2], [4, 0], [2, 2]]]
    k = [[2, 0], [0, 4], [2, 2]]
    v = [[1, 0], [0, 2], [1, 1]]
    causal = [[j <= i for j in range(3)] for i in range(3)]
    heads = [mm(softmax_rows(where(causal, mm(q, tr(k)), -INF)), v) for q in qs]  # no 1/√2
    concat = [a + b for a, b in zip(*heads)]
    assert keys(diagnose(sol, "concat", None, rnd(concat, 3), tolerance=TOL)) == ["no_scaling"]
    assert keys(diagnose(sol, "output", None, rnd(concat, 3), tolerance=TOL)) == ["no_scaling"]
