"""The exact engine against oracles written here: hand calculation, float64 NumPy, sympy.

* the classic example, every step against values worked out by hand below;
* every bundled exercise, every step's floats against an independent NumPy
  computation (1e-12), and every exact entry against sympy and the answer parser;
* the number machinery (``square_free``, the surd printer, ``QMat``, ``mix``)
  against sympy and plain ``Fraction`` arithmetic;
* the edge cases: ties, fully masked rows, perfect-square d_k, L_q ≠ L_k,
  huge scores, biases.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor import answers
from tutor.base.errors import ShapeError
from tutor.exact.engine import QMat, matmul
from tutor.exact.numbers import (
    Mix,
    MixSum,
    NegInf,
    Rat,
    SoftmaxRow,
    Surd,
    frac_text,
    mix,
    mix_sum,
    square_free,
    surd_text,
)
from tutor.exercise import exercise_from_data, load_exercise
from tutor.steps import solve

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
def _v1(path) -> bool:
    """The bundled exercises of format v1: this file's NumPy oracle (format v2's is tests/test_v2_torch.py, MLA's
    tests/test_mla.py, RoPE's tests/test_rope.py)."""
    ex = load_exercise(str(path))  # the pre-norm block's steps are tests/test_prenorm_block.py's
    return (not ex.is_v2 and ex.mask_kind != "causal_lower_right" and ex.mla is None and ex.rope is None
            and not (ex.has_norm or ex.residual))


BUNDLED = [p for p in sorted(EXERCISES.glob("*.yaml")) if _v1(p)]
IDS = [p.stem for p in BUNDLED]
S2 = math.sqrt(2)


def strs(step):
    return [[str(e) for e in row] for row in step.exact]


def fracs(step):
    """The exact entries of a rational step as Fractions (fails on anything else)."""
    out = []
    for row in step.exact:
        assert all(isinstance(e, Rat) for e in row), [str(e) for e in row]
        out.append([e.q for e in row])
    return out


# --- the classic example, by hand ---------------------------------------------


@pytest.fixture(scope="module")
def classic():
    return solve(load_exercise(str(EXERCISES / "single-head-3x4.yaml")))


def test_classic_step_order_ids_shapes(classic):
    assert [(s.id, s.head) for s in classic.steps] == [
        ("q", 0), ("k", 0), ("v", 0), ("scores", 0), ("scaled", 0), ("weights", 0), ("head_output", 0),
    ]  # no mask: no `masked`; one head: no `concat`; no w_o: no `output`
    assert [s.shape for s in classic.steps] == [(3, 2), (3, 2), (3, 2), (3, 3), (3, 3), (3, 3), (3, 2)]
    assert classic.final is classic.step("head_output", 0)
    assert classic.step("scores", 0).row_labels == ("t1", "t2", "t3")
    assert classic.step("scores", 0).col_labels == ("t1", "t2", "t3")


def test_classic_annotations(classic):
    assert classic.step("q", 0).annotation() == "X [3×4] · W_Q [4×2] → Q [3×2]"
    assert classic.step("k", 0).annotation() == "X [3×4] · W_K [4×2] → K [3×2]"
    assert classic.step("scores", 0).annotation() == "Q [3×2] · Kᵀ [2×3] → scores [3×3]"


def test_classic_projections(classic):
    # x rows [1,0,1,0], [0,2,0,2], [1,1,1,1]; W = [[1,0],[1,0],[0,1],[0,1]]:
    # column 0 = x_0 + x_1, column 1 = x_2 + x_3
    qkv = [[1, 1], [2, 2], [2, 2]]
    for sid in ("q", "k", "v"):
        assert fracs(classic.step(sid, 0)) == qkv
        assert classic.step(sid, 0).value == ((1.0, 1.0), (2.0, 2.0), (2.0, 2.0))
        assert strs(classic.step(sid, 0)) == [["1", "1"], ["2", "2"], ["2", "2"]]


def test_classic_scores(classic):
    # q_i · k_j with q = k = [1,1], [2,2], [2,2]
    assert fracs(classic.step("scores", 0)) == [[2, 4, 4], [4, 8, 8], [4, 8, 8]]


def test_classic_scaled(classic):
    step = classic.step("scaled", 0)
    # scores / sqrt(2) = scores * sqrt(2) / 2
    assert strs(step) == [
        ["sqrt(2)", "2*sqrt(2)", "2*sqrt(2)"],
        ["2*sqrt(2)", "4*sqrt(2)", "4*sqrt(2)"],
        ["2*sqrt(2)", "4*sqrt(2)", "4*sqrt(2)"],
    ]
    for row, hand in zip(step.exact, [[1, 2, 2], [2, 4, 4], [2, 4, 4]]):
        for e, k in zip(row, hand):
            assert isinstance(e, Surd)
            assert e.to_sympy() == k * sympy.sqrt(2)
    expected = [[s / S2 for s in r] for r in [[2, 4, 4], [4, 8, 8], [4, 8, 8]]]
    np.testing.assert_allclose(step.value, expected, rtol=1e-15)


def hand_softmax(row):
    m = max(row)
    e = [math.exp(a - m) for a in row]
    return [v / sum(e) for v in e]


def test_classic_weights(classic):
    step = classic.step("weights", 0)
    hand = [hand_softmax([k * S2 for k in r]) for r in [[1, 2, 2], [2, 4, 4], [2, 4, 4]]]
    np.testing.assert_allclose(step.value, hand, rtol=1e-13)
    assert [round(w, 4) for w in step.value[0]] == [0.1084, 0.4458, 0.4458]
    # w_00 = e^√2 / (e^√2 + 2 e^{2√2}) = 1 / (1 + 2 e^√2)
    assert step.value[0][0] == pytest.approx(1 / (1 + 2 * math.exp(S2)), rel=1e-14)
    assert str(step.exact[0][0]) == "1/(1 + 2*exp(sqrt(2)))"
    assert step.value[1][0] == pytest.approx(1 / (1 + 2 * math.exp(2 * S2)), rel=1e-14)
    # the exact forms are the hand forms
    r = sympy.sqrt(2)
    by_hand = []
    for k in (1, 2, 2):  # row i has scaled scores (k, 2k, 2k)·√2: w_i0 = 1/(1 + 2e^{k√2}), w_i1 = w_i2 = e^{k√2}/(1 + 2e^{k√2})
        z = 1 + 2 * sympy.exp(k * r)
        by_hand.append([1 / z, sympy.exp(k * r) / z, sympy.exp(k * r) / z])
    for i, row in enumerate(by_hand):
        for j, expr in enumerate(row):
            assert abs(sympy.N(step.exact[i][j].to_sympy() - expr, 50)) < 1e-45
    for row in step.value:
        assert math.fsum(row) == pytest.approx(1.0, abs=1e-15)
    assert step.value[1] == step.value[2]


def test_classic_head_output(classic):
    step = classic.step("head_output", 0)
    v = [[1, 1], [2, 2], [2, 2]]
    w = [hand_softmax([k * S2 for k in r]) for r in [[1, 2, 2], [2, 4, 4], [2, 4, 4]]]
    hand = [[sum(w[i][j] * v[j][c] for j in range(3)) for c in range(2)] for i in range(3)]
    np.testing.assert_allclose(step.value, hand, rtol=1e-14)
    # row 0: w_00·1 + (1 - w_00)·2 = 2 - w_00 = 2 - 1/(1 + 2e^√2)
    assert step.value[0][0] == pytest.approx(2 - 1 / (1 + 2 * math.exp(S2)), rel=1e-14)
    assert abs(sympy.N(step.exact[0][0].to_sympy() - (2 - 1 / (1 + 2 * sympy.exp(sympy.sqrt(2)))), 50)) < 1e-45
    assert round(step.value[0][0], 4) == 1.8916


# --- every bundled exercise against NumPy ---------------------------------------


def _np(m) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in m], dtype=np.float64)


def _vec(b) -> np.ndarray | float:
    return 0.0 if b is None else np.array([float(v) for v in b], dtype=np.float64)


def numpy_attention(ex) -> dict[tuple[str, int | None], np.ndarray]:
    """float64 multi-head attention from the exercise's Fractions, step by step."""
    x = _np(ex.x)  # [L, d_model]
    kv = _np(ex.x_kv) if ex.x_kv is not None else x  # [L_k, d_kv]
    L, L_k = x.shape[0], kv.shape[0]
    allowed = np.ones((L, L_k), dtype=bool)
    if ex.mask is not None:
        allowed &= np.array(ex.mask, dtype=bool)
    if ex.key_padding is not None:
        allowed &= np.array(ex.key_padding, dtype=bool)[None, :]
    out: dict[tuple[str, int | None], np.ndarray] = {}
    heads = []
    for h, head in enumerate(ex.heads):
        q = x @ _np(head.w_q) + _vec(head.b_q)  # [L, d_k]
        k = kv @ _np(head.w_k) + _vec(head.b_k)  # [L_k, d_k]
        v = kv @ _np(head.w_v) + _vec(head.b_v)  # [L_k, d_v]
        scores = q @ k.T  # [L, L_k]
        scaled = scores / np.sqrt(q.shape[1])  # [L, L_k]
        masked = np.where(allowed, scaled, -np.inf)  # [L, L_k]
        weights = np.zeros_like(masked)
        for i in range(L):
            if allowed[i].any():
                e = np.exp(masked[i] - masked[i].max())
                weights[i] = e / e.sum()
            # a fully masked row stays zero
        head_out = weights @ v  # [L, d_v]
        out.update({("q", h): q, ("k", h): k, ("v", h): v, ("scores", h): scores, ("scaled", h): scaled,
                    ("weights", h): weights, ("head_output", h): head_out})
        if ex.mask is not None or ex.key_padding is not None:
            out[("masked", h)] = masked
        heads.append(head_out)
    concat = np.concatenate(heads, axis=1)  # [L, H·d_v]
    if len(heads) > 1:
        out[("concat", None)] = concat
    if ex.w_o is not None:
        out[("output", None)] = concat @ _np(ex.w_o) + _vec(ex.b_o)  # [L, d_out]
    return out


def check_against_numpy(sol) -> None:
    ref = numpy_attention(sol.exercise)
    assert {(s.id, s.head) for s in sol.steps} == set(ref)
    for s in sol.steps:
        expected = ref[(s.id, s.head)]
        got = np.array(s.value, dtype=np.float64)
        assert got.shape == expected.shape, (s.id, s.head)
        finite = np.isfinite(expected)
        assert np.array_equal(np.isneginf(got), np.isneginf(expected)), (s.id, s.head)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-12, atol=1e-12, err_msg=f"{s.id} head {s.head}")


@pytest.fixture(scope="module", params=BUNDLED, ids=IDS)
def bundled(request):
    path = request.param
    return path, solve(load_exercise(str(path)))


def test_bundled_floats_match_numpy(bundled):
    check_against_numpy(bundled[1])


def test_bundled_step_order_per_contract(bundled):
    path, sol = bundled
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))  # the file itself, not the loader
    n_heads = raw.get("num_heads") or len(raw["heads"])
    masked = raw.get("mask", "none") not in ("none", None) or "key_padding" in raw or "key_padding_mask" in raw
    per_head = ["q", "k", "v", "scores", "scaled"] + (["masked"] if masked else []) + ["weights", "head_output"]
    expected = [(sid, h) for h in range(n_heads) for sid in per_head]
    expected += [("concat", None)] if n_heads > 1 else []
    expected += [("output", None)] if "w_o" in raw else []
    assert [(s.id, s.head) for s in sol.steps] == expected


def test_bundled_shapes(bundled):
    path, sol = bundled
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    L, L_k = len(raw["x"]), len(raw.get("x_kv", raw["x"]))
    n_heads = raw.get("num_heads") or len(raw["heads"])
    if "heads" in raw:
        d_k, d_v = len(raw["heads"][0]["w_q"][0]), len(raw["heads"][0]["w_v"][0])
    else:
        d_k, d_v = len(raw["w_q"][0]) // n_heads, len(raw["w_v"][0]) // n_heads
    shapes = {"q": (L, d_k), "k": (L_k, d_k), "v": (L_k, d_v), "scores": (L, L_k), "scaled": (L, L_k),
              "masked": (L, L_k), "weights": (L, L_k), "head_output": (L, d_v), "concat": (L, n_heads * d_v)}
    if "w_o" in raw:
        shapes["output"] = (L, len(raw["w_o"][0]))
    for s in sol.steps:
        assert s.shape == shapes[s.id], (s.id, s.head)
        assert len(s.row_labels) == s.shape[0] and len(s.col_labels) == s.shape[1]


def test_bundled_masked_entries_are_minus_inf(bundled):
    sol = bundled[1]
    allowed = sol.exercise.allowed()
    for s in sol.steps:
        if s.id != "masked":
            continue
        for i, row in enumerate(s.exact):
            for j, e in enumerate(row):
                if allowed[i][j]:
                    assert math.isfinite(s.value[i][j])
                    assert str(e) == str(sol.step("scaled", s.head).exact[i][j])
                else:
                    assert isinstance(e, NegInf) and str(e) == "-inf" and s.value[i][j] == -math.inf


def test_bundled_weight_rows_sum_to_one_or_zero(bundled):
    sol = bundled[1]
    allowed = sol.exercise.allowed()
    for h in range(sol.exercise.num_heads):
        for i, row in enumerate(sol.step("weights", h).value):
            full = allowed is not None and not any(allowed[i])
            assert math.fsum(row) == pytest.approx(0.0 if full else 1.0, abs=1e-14)
            assert all(w >= 0 for w in row)


# --- the exact strings are honest ---------------------------------------------


def check_exact_entries(sol) -> int:
    n = 0
    for s in sol.steps:
        for i, row in enumerate(s.exact):
            for j, e in enumerate(row):
                v = e.value()
                assert v == s.value[i][j]
                text = str(e)
                parsed = answers.parse_entry(text)
                if math.isinf(v):
                    assert e.to_sympy() == -sympy.oo
                    assert parsed.value() == v
                    continue
                exact = float(sympy.N(e.to_sympy(), 30))
                assert exact == pytest.approx(v, rel=1e-12, abs=1e-300), (s.id, s.head, i, j, text)
                assert parsed.value() == pytest.approx(v, rel=1e-12, abs=1e-300), (s.id, s.head, i, j, text)
                assert parsed.is_exact, text  # no decimals in an exact form
                n += 1
    return n


def test_bundled_exact_entries_agree_with_sympy_and_the_answer_parser(bundled):
    assert check_exact_entries(bundled[1]) > 0


@pytest.mark.parametrize("p", [0, 1, -1, 2, -3, 7, 12, -100])
@pytest.mark.parametrize("q", [1, 2, 3, 4, 9])
@pytest.mark.parametrize("t", [1, 2, 3, 5, 6, 7, 10, 30])
def test_surd_text_matches_sympy_grid(p, q, t):
    assert surd_text(Fraction(p, q), t) == str(sympy.Rational(p, q) * sympy.sqrt(t))


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**6, 10**6), st.integers(1, 10**6), st.integers(1, 10**4))
def test_surd_text_matches_sympy(p, q, n):
    _, t = square_free(n)  # Surd keeps t square-free, as sympy does
    assert surd_text(Fraction(p, q), t) == str(sympy.Rational(p, q) * sympy.sqrt(t))


@settings(max_examples=300, deadline=None)
@given(st.integers(-10**12, 10**12), st.integers(1, 10**12))
def test_frac_text_matches_sympy(p, q):
    assert frac_text(Fraction(p, q)) == str(sympy.Rational(p, q))


# --- number machinery ------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**7))
def test_square_free(n):
    s, t = square_free(n)
    assert s * s * t == n
    assert all(e == 1 for e in sympy.factorint(t).values())


def test_square_free_by_hand():
    assert [square_free(n) for n in (1, 2, 4, 8, 12, 18, 32, 36, 50, 97)] == [
        (1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (4, 2), (6, 1), (5, 2), (1, 97),
    ]


def fraction_matmul(a, b):
    """Plain triple loop over Fractions."""
    return [[sum((a[i][k] * b[k][j] for k in range(len(b))), Fraction(0)) for j in range(len(b[0]))] for i in range(len(a))]


fractions_ = st.fractions(min_value=-50, max_value=50, max_denominator=12)


@st.composite
def chained(draw):
    n, m, p = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    a = draw(st.lists(st.lists(fractions_, min_size=m, max_size=m), min_size=n, max_size=n))
    b = draw(st.lists(st.lists(fractions_, min_size=p, max_size=p), min_size=m, max_size=m))
    bias = draw(st.lists(fractions_, min_size=p, max_size=p))
    return a, b, bias


@settings(max_examples=100, deadline=None)
@given(chained())
def test_qmat_matmul_matches_fraction_matmul(case):
    a, b, bias = case
    expected = fraction_matmul(a, b)
    got = QMat.of(a) @ QMat.of(b)
    assert got.fractions() == expected
    assert got.shape == (len(a), len(b[0]))
    assert matmul(a, b) == expected
    assert [[e.q for e in row] for row in got.exact()] == expected
    assert got.plus(tuple(bias)).fractions() == [[x + c for x, c in zip(row, bias)] for row in expected]
    assert got.plus(None).fractions() == expected
    assert QMat.of(a).T.fractions() == [list(col) for col in zip(*a)]
    assert got.over(3).fractions() == [[x / 3 for x in row] for row in expected]


def test_qmat_shape_error():
    with pytest.raises(ShapeError, match=r"\[2×3\]·\[2×2\]"):
        QMat.of([[Fraction(1)] * 3] * 2) @ QMat.of([[Fraction(1)] * 2] * 2)
    assert issubclass(ShapeError, ValueError)


def test_mix_ties_are_rational():
    # three equal exponents: exactly uniform
    row = SoftmaxRow((5, 5, 5), 3, 2)
    for j in range(3):
        w = mix(row, tuple(int(i == j) for i in range(3)))
        assert isinstance(w, Rat) and w.q == Fraction(1, 3) and str(w) == "1/3"
    # exponents (a, a, 0) with coefficients (2, 0, 1): (2e^a + 1)/(2e^a + 1) = 1
    row = SoftmaxRow((4, 4, 0), 1, 2)
    one = mix(row, (2, 0, 1))
    assert isinstance(one, Rat) and one.q == 1
    # ... and over a denominator: (2, 0, 1)/4 gives 1/4
    assert mix(row, (2, 0, 1), 4) == Rat(Fraction(1, 4))
    # equal coefficients on distinct exponents: their value
    assert mix(SoftmaxRow((0, 1, 2), 1, 3), (7, 7, 7), 2) == Rat(Fraction(7, 2))


def test_mix_not_a_tie_stays_exact():
    row = SoftmaxRow((4, 4, 0), 1, 2)  # a = 4·√2 for keys 0 and 1, 0 for key 2
    m = mix(row, (1, 0, 0))
    assert isinstance(m, Mix)
    a = 4 * S2
    assert m.value() == pytest.approx(math.exp(a) / (2 * math.exp(a) + 1), rel=1e-14)
    expr = sympy.exp(4 * sympy.sqrt(2)) / (2 * sympy.exp(4 * sympy.sqrt(2)) + 1)
    assert abs(sympy.N(m.to_sympy() - expr, 50)) < 1e-45
    assert answers.parse_entry(str(m)).value() == pytest.approx(m.value(), rel=1e-12)


def test_mix_masked_keys_and_fully_masked_row():
    row = SoftmaxRow((None, None, None), 1, 2)
    assert all(mix(row, c) == Rat(Fraction(0)) for c in [(1, 0, 0), (0, 1, 0), (3, 5, 7)])
    assert str(mix(row, (1, 0, 0))) == "0"
    # one live key: weight 1 there, and coefficients on masked keys are ignored
    row = SoftmaxRow((None, 7, None), 2, 2)
    assert mix(row, (0, 1, 0)) == Rat(Fraction(1))
    assert mix(row, (1, 0, 0)) == Rat(Fraction(0))
    assert mix(row, (9, 4, 9), 3) == Rat(Fraction(4, 3))


def _sympy_sum(parts, const=Fraction(0)):
    """The sum as sympy builds it from the same rows: an independent oracle of its value and rationality."""
    return sympy.Add(*(p.to_sympy() for p in parts)) + sympy.Rational(const.numerator, const.denominator)


def test_mix_sum_of_two_heads_over_shifted_rows_is_rational():
    """Head 0's row has exponents (0, -√2, -√2/2)·…, head 1's the same shifted by √2: one denominator,
    numerators that add up to (3/2) of it (the two entries of two-head-fused-3x4 that are 3/2)."""
    a = SoftmaxRow((0, -2, -1), 2, 2)  # exponents 0, -√2, -√2/2
    b = SoftmaxRow((2, 0, 1), 2, 2)  # the same, shifted by +√2
    m0 = mix(a, (3, 1, 3), 2)  # (3 + e^-√2 + 3e^(-√2/2)) / (2(1 + e^-√2 + e^(-√2/2)))
    m1 = mix(b, (0, 2, 0), 2)  # 1·e^0 / Z_b: the rest to make 3/2
    assert isinstance(m0, Mix) and isinstance(m1, Mix)
    total = mix_sum([m0, m1], Fraction(0))
    assert total == Rat(Fraction(3, 2))
    assert sympy.simplify(_sympy_sum([m0, m1]) - sympy.Rational(3, 2)) == 0


def test_mix_sum_decides_through_a_shared_factor_of_different_denominators():
    """1/(1 + e) over two keys, (e + e³)/(1 + e + e² + e³) = e/(1 + e) over four: different
    denominators that share the factor 1 + e, and the sum is 1."""
    two = mix(SoftmaxRow((0, 1), 1, 1), (1, 0))
    four = mix(SoftmaxRow((0, 1, 2, 3), 1, 1), (0, 1, 0, 1))
    assert isinstance(two, Mix) and isinstance(four, Mix)
    assert mix_sum([two, four], Fraction(1, 3)) == Rat(Fraction(4, 3))
    assert sympy.simplify(_sympy_sum([two, four]) - 1) == 0


def test_mix_sum_keeps_an_irrational_sum_and_folds_its_rational_groups():
    x = mix(SoftmaxRow((0, 1), 1, 2), (1, 0))  # 1/(1 + e^√2): irrational
    y = mix(SoftmaxRow((0, 2), 2, 2), (0, 1))  # e^√2/(1 + e^√2): with x, exactly 1
    z = mix(SoftmaxRow((0, 3), 1, 2), (1, 0))  # 1/(1 + e^(3√2)): irrational, another denominator
    total = mix_sum([x, y, z], Fraction(1, 2))
    assert isinstance(total, MixSum) and total.parts == (z,) and total.const == Fraction(3, 2)
    assert total.value() == pytest.approx(float(sympy.N(_sympy_sum([x, y, z], Fraction(1, 2)), 30)), rel=1e-14)
    assert mix_sum([x], Fraction(0)) is x


_X = sympy.Symbol("x", positive=True)


def _rational_function(parts) -> sympy.Expr:
    """The sum as a rational function of x = exp(sqrt(t)/M): sympy's own cancellation decides
    whether it is constant (a constant is the only way the value can be rational)."""
    big = math.lcm(*(p.row.den for p in parts))
    out = sympy.Integer(0)
    for p in parts:
        k = big // p.row.den
        num = sum(sympy.Rational(c, p.cden) * _X ** (p.row.nums[j] * k) for j, c in enumerate(p.cnums) if j in p.row.live)
        den = sum(_X ** (p.row.nums[j] * k) for j in p.row.live)
        out += num / den
    return sympy.cancel(sympy.together(out))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(-2, 2), min_size=1, max_size=3),
                          st.lists(st.integers(-2, 2), min_size=3, max_size=3)), min_size=2, max_size=3))
def test_mix_sum_is_rational_exactly_when_sympy_cancels_it_to_a_constant(rows):
    parts = []
    for nums, coeffs in rows:
        m = mix(SoftmaxRow(tuple(nums), 1, 1), tuple(coeffs[: len(nums)]))
        if isinstance(m, Mix):
            parts.append(m)
    if len(parts) < 2:
        return
    total = mix_sum(parts, Fraction(0))
    f = _rational_function(parts)
    assert isinstance(total, Rat) == (not f.free_symbols)
    if isinstance(total, Rat):
        assert sympy.Rational(total.q.numerator, total.q.denominator) == f


def test_the_fused_exercise_shows_its_two_rational_outputs_as_three_halves():
    sol = solve(load_exercise(EXERCISES / "two-head-fused-3x4.yaml"))
    out = sol.step("output", None)
    assert out.exact[2][0] == Rat(Fraction(3, 2)) and out.exact[2][1] == Rat(Fraction(3, 2))
    assert str(out.exact[2][0]) == "3/2"
    rest = [e for i, row in enumerate(out.exact) for j, e in enumerate(row) if (i, j) not in ((2, 0), (2, 1))]
    assert not any(isinstance(e, Rat) for e in rest)  # the others are not rational


# --- edge cases through the engine ------------------------------------------------


def ident(n):
    return [[int(i == j) for j in range(n)] for i in range(n)]


def exercise(**fields):
    data = {"id": "t", "title": "t", **fields}
    return exercise_from_data(data)


def test_all_equal_scores_give_exactly_uniform_weights():
    ex = exercise(x=[[1, 1], [1, 1], [1, 1]], heads=[{"w_q": ident(2), "w_k": ident(2), "w_v": [[1, 0], [0, 2]]}])
    sol = solve(ex)
    assert fracs(sol.step("scores", 0)) == [[2, 2, 2]] * 3
    assert strs(sol.step("weights", 0)) == [["1/3"] * 3] * 3
    assert fracs(sol.step("weights", 0)) == [[Fraction(1, 3)] * 3] * 3
    assert fracs(sol.step("head_output", 0)) == [[1, 2]] * 3  # the mean of V's rows, all [1, 2]
    check_against_numpy(sol)


def test_fully_masked_row_gives_zero_weights_and_zero_output():
    ex = exercise(
        x=ident(3),
        heads=[{"w_q": [[1, 1], [1, 0], [0, 1]], "w_k": [[1, 0], [0, 1], [1, 1]], "w_v": [[1, 0], [0, 1], [1, 1]]},
               {"w_q": [[1, 0], [0, 1], [1, 1]], "w_k": [[1, 1], [1, 0], [0, 1]], "w_v": [[2, 0], [0, 3], [1, 1]]}],
        mask=[[True, True, False], [True, True, True], [False, False, False]],
        w_o=[[1, 0], [0, 1], [1, 1], [1, -1]],
        b_o=["1/2", -2],
    )
    sol = solve(ex)
    for h in (0, 1):
        assert strs(sol.step("masked", h))[2] == ["-inf"] * 3
        assert sol.step("weights", h).exact[2] == (Rat(Fraction(0)),) * 3
        assert sol.step("weights", h).value[2] == (0.0, 0.0, 0.0)
        assert sol.step("head_output", h).exact[2] == (Rat(Fraction(0)),) * 2
        # row 0 attends keys 0 and 1 only
        assert sol.step("weights", h).exact[0][2] == Rat(Fraction(0))
    assert sol.step("concat").exact[2] == (Rat(Fraction(0)),) * 4
    assert [e.q for e in sol.step("output").exact[2]] == [Fraction(1, 2), Fraction(-2)]  # zero row · W_O + b_O
    assert not any(math.isnan(v) for s in sol.steps for row in s.value for v in row)
    check_against_numpy(sol)
    check_exact_entries(sol)


def test_bundled_fully_masked_row():
    sol = solve(load_exercise(str(EXERCISES / "fully-masked-row-3x3.yaml")))
    assert strs(sol.step("weights", 0))[2] == ["0", "0", "0"]
    assert strs(sol.step("head_output", 0))[2] == ["0", "0"]
    # row 0 sees keys 0 and 1 with equal scores 1 and 1: exactly [1/2, 1/2, 0]
    assert fracs(sol.step("scores", 0))[0] == [1, 1, 2]
    assert strs(sol.step("weights", 0))[0] == ["1/2", "1/2", "0"]


def test_all_keys_padded_gives_zero_rows():
    ex = exercise(x=[[1, 2], [3, 4]], heads=[{"w_q": ident(2), "w_k": ident(2), "w_v": ident(2)}],
                  key_padding=[False, False])
    sol = solve(ex)
    assert fracs(sol.step("weights", 0)) == [[0, 0], [0, 0]]
    assert fracs(sol.step("head_output", 0)) == [[0, 0], [0, 0]]
    check_against_numpy(sol)


def test_perfect_square_d_k_gives_rational_scaled_scores():
    sol = solve(load_exercise(str(EXERCISES / "single-head-dk4-2x4.yaml")))
    scores = fracs(sol.step("scores", 0))
    # x = [[1,2,0,1],[0,1,1,2]], W_Q = W_K = I: scores = x xᵀ
    assert scores == [[6, 4], [4, 6]]
    assert fracs(sol.step("scaled", 0)) == [[3, 2], [2, 3]]  # / √4 = / 2
    # d_k = 9: / 3, still rational
    ex = exercise(x=[[1] * 9, [2] + [0] * 8], heads=[{"w_q": ident(9), "w_k": ident(9), "w_v": ident(9)}])
    sol9 = solve(ex)
    assert fracs(sol9.step("scores", 0)) == [[9, 2], [2, 4]]
    assert fracs(sol9.step("scaled", 0)) == [[3, Fraction(2, 3)], [Fraction(2, 3), Fraction(4, 3)]]
    check_against_numpy(sol9)


def test_d_k_eight_keeps_one_root_two():
    # √8 = 2√2: a score s scales to s/(2√2) = s·√2/4
    ex = exercise(x=[[1] * 8, [2] * 8], heads=[{"w_q": ident(8), "w_k": ident(8), "w_v": [[1]] * 8}])
    sol = solve(ex)
    assert fracs(sol.step("scores", 0)) == [[8, 16], [16, 32]]
    assert strs(sol.step("scaled", 0)) == [["2*sqrt(2)", "4*sqrt(2)"], ["4*sqrt(2)", "8*sqrt(2)"]]
    assert "√8 = 2√2" in sol.step("scaled", 0).formula
    check_against_numpy(sol)
    check_exact_entries(sol)


def test_d_k_one_divides_by_one():
    sol = solve(load_exercise(str(EXERCISES / "two-head-dk1-3x4.yaml")))
    for h in (0, 1):
        assert fracs(sol.step("scaled", h)) == fracs(sol.step("scores", h))


def test_cross_attention_shapes():
    sol = solve(load_exercise(str(EXERCISES / "cross-attention-2x3.yaml")))
    ex = sol.exercise
    assert (ex.L, ex.L_k) == (2, 3)
    assert {s.id: s.shape for s in sol.steps} == {
        "q": (2, 2), "k": (3, 2), "v": (3, 2), "scores": (2, 3), "scaled": (2, 3), "weights": (2, 3), "head_output": (2, 2),
    }
    assert sol.step("scores", 0).row_labels == ("je", "suis")
    assert sol.step("scores", 0).col_labels == ("I", "am", "here")
    # K = x_kv W_K with W_K = [[1,0],[0,1],[0,0]]; Q = x = I
    assert fracs(sol.step("k", 0)) == [[1, 0], [0, 1], [1, 1]]
    assert fracs(sol.step("v", 0)) == [[1, 0], [0, 1], [2, 2]]
    assert fracs(sol.step("scores", 0)) == [[1, 0, 1], [0, 1, 1]]
    # row 0: keys 0 and 2 tie at √2/2, key 1 at 0
    w = sol.step("weights", 0).value[0]
    a = S2 / 2
    z = 2 * math.exp(a) + 1
    assert w == pytest.approx((math.exp(a) / z, 1 / z, math.exp(a) / z), rel=1e-14)
    assert "X_kv [3×3]" in sol.step("k", 0).annotation()


def test_cross_attention_with_causal_mask_is_top_left_aligned():
    ex = exercise(x=[[1, 0], [0, 1]], x_kv=[[1, 0], [0, 1], [1, 1]],
                  heads=[{"w_q": ident(2), "w_k": ident(2), "w_v": ident(2)}], mask="causal")
    sol = solve(ex)
    assert strs(sol.step("masked", 0))[0][1:] == ["-inf", "-inf"]
    assert strs(sol.step("masked", 0))[1][2] == "-inf"
    assert strs(sol.step("weights", 0))[0] == ["1", "0", "0"]
    check_against_numpy(sol)


def test_huge_scores_give_finite_floats():
    ex = exercise(x=[[1000, 0], [0, 1000], [1000, 1000]],
                  heads=[{"w_q": ident(2), "w_k": ident(2), "w_v": ident(2)}],
                  w_o=[[1, 2], [3, 4]], b_o=[1, -1])
    sol = solve(ex)
    assert fracs(sol.step("scores", 0)) == [[10**6, 0, 10**6], [0, 10**6, 10**6], [10**6, 10**6, 2 * 10**6]]
    for s in sol.steps:
        assert all(math.isfinite(v) for row in s.value for v in row), s.id
    w = sol.step("weights", 0).value
    assert w[0] == pytest.approx((0.5, 0.0, 0.5), abs=1e-300)  # exp(-10^6/√2) underflows to 0
    assert w[2] == (0.0, 0.0, 1.0)
    check_against_numpy(sol)
    # output[0][1] = Σ_j w_0j (V W_O)_j1 - 1 with V W_O[:,1] = (2000, 4000, 6000) and w_00 = w_02:
    # (1 - w_01)/2 · 8000 + 4000·w_01 - 1 = 3999 exactly
    assert sol.step("output").exact[0][1] == Rat(Fraction(3999))
    for s in sol.steps:
        for row in s.exact:
            for e in row:
                assert float(sympy.N(e.to_sympy(), 30)) == pytest.approx(e.value(), rel=1e-12, abs=1e-300)


def test_biases_by_hand():
    ex = exercise(
        x=[[1, 2], [0, 1]],
        heads=[{"w_q": ident(2), "w_k": ident(2), "w_v": ident(2),
                "b_q": ["1/2", -1], "b_k": [0, "1/3"], "b_v": [2, "0.25"]}],
        w_o=[[1, 1], [0, 1]], b_o=[10, "-1/2"],
    )
    sol = solve(ex)
    assert fracs(sol.step("q", 0)) == [[Fraction(3, 2), 1], [Fraction(1, 2), 0]]
    assert fracs(sol.step("k", 0)) == [[1, Fraction(7, 3)], [0, Fraction(4, 3)]]
    assert fracs(sol.step("v", 0)) == [[3, Fraction(9, 4)], [2, Fraction(5, 4)]]
    # scores = Q Kᵀ: [3/2 + 7/3, 4/3], [1/2, 0]
    assert fracs(sol.step("scores", 0)) == [[Fraction(23, 6), Fraction(4, 3)], [Fraction(1, 2), 0]]
    assert sol.step("q", 0).formula == "Q = X·W_Q + b_Q"
    assert sol.step("q", 0).annotation() == "X [2×2] · W_Q [2×2] + b_Q [2] → Q [2×2]"
    assert sol.step("output").formula == "output = head_1·W_O + b_O"
    check_against_numpy(sol)
    check_exact_entries(sol)
    # output row 1 by hand: weights of row 1 from scaled scores (1/2, 0)/√2
    a = 0.5 / S2
    w = [math.exp(a) / (math.exp(a) + 1), 1 / (math.exp(a) + 1)]
    head = [w[0] * 3 + w[1] * 2, w[0] * 9 / 4 + w[1] * 5 / 4]
    out = [head[0] + 10, head[0] + head[1] - 0.5]
    assert sol.step("output").value[1] == pytest.approx(tuple(out), rel=1e-14)


def test_two_head_output_projection_by_hand():
    sol = solve(load_exercise(str(EXERCISES / "two-head-fused-3x4.yaml")))
    # head 0, query 1: scores (2, 2, 2) tie -> weights exactly 1/3 and output = mean of V rows
    assert strs(sol.step("weights", 0))[1] == ["1/3", "1/3", "1/3"]
    assert fracs(sol.step("v", 0)) == [[Fraction(3, 2), 0], [Fraction(1, 2), 1], [Fraction(3, 2), 1]]
    assert [e.q for e in sol.step("head_output", 0).exact[1]] == [Fraction(7, 6), Fraction(2, 3)]
    concat = np.array(sol.step("concat").value)
    assert concat.shape == (3, 4)
    np.testing.assert_array_equal(concat[:, :2], np.array(sol.step("head_output", 0).value))
    np.testing.assert_array_equal(concat[:, 2:], np.array(sol.step("head_output", 1).value))


@st.composite
def small_exercises(draw):
    ent = st.fractions(min_value=-3, max_value=3, max_denominator=3).map(str)
    L, d, H = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    d_k, d_v = draw(st.sampled_from([1, 2, 3, 4, 8])), draw(st.integers(1, 2))
    cross = draw(st.booleans())
    L_k, d_kv = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if cross else (L, d)

    def m(r, c):
        return draw(st.lists(st.lists(ent, min_size=c, max_size=c), min_size=r, max_size=r))

    data = {"id": "h", "title": "h", "x": m(L, d), "heads": []}
    if cross:
        data["x_kv"] = m(L_k, d_kv)
    for _ in range(H):
        head = {"w_q": m(d, d_k), "w_k": m(d_kv, d_k), "w_v": m(d_kv, d_v)}
        for b, n in (("b_q", d_k), ("b_k", d_k), ("b_v", d_v)):
            if draw(st.booleans()):
                head[b] = m(1, n)[0]
        data["heads"].append(head)
    if draw(st.booleans()):
        data["w_o"] = m(H * d_v, draw(st.integers(1, 3)))
        if draw(st.booleans()):
            data["b_o"] = m(1, len(data["w_o"][0]))[0]
    if draw(st.booleans()):
        data["mask"] = draw(st.lists(st.lists(st.booleans(), min_size=L_k, max_size=L_k), min_size=L, max_size=L))
    if draw(st.booleans()):
        data["key_padding"] = draw(st.lists(st.booleans(), min_size=L_k, max_size=L_k))
    return exercise_from_data(data)


@settings(max_examples=60, deadline=None)
@given(small_exercises())
def test_random_exercises_match_numpy_and_sympy(ex):
    sol = solve(ex)
    check_against_numpy(sol)
    check_exact_entries(sol)


def test_floats_survive_cancellation():
    """2 - 2/(1 + 2e^(-8√2)) cancels 4 digits in float64; the engine's value is still right to 1e-14 relative."""
    import mpmath

    from tutor.exact.numbers import SoftmaxRow, mix, mix_sum

    row = SoftmaxRow((0, -8, -8), 1, 2)  # exponents 0, -8√2, -8√2
    entry = mix_sum([mix(row, (-2, 0, 0), 1)], Fraction(2))
    with mpmath.workdps(60):
        e = mpmath.exp(-8 * mpmath.sqrt(2))
        truth = float(4 * e / (1 + 2 * e))  # the same number, written without the cancellation
    assert entry.value() == pytest.approx(truth, rel=1e-14, abs=0)
    assert str(entry) == "-2/(1 + 2*exp(-8*sqrt(2))) + 2"
    # a mix whose own numerator cancels: coefficients +1 and -1 on nearly equal exponents
    row2 = SoftmaxRow((0, -1), 10**6, 2)  # exponents 0 and -√2·1e-6
    m = mix(row2, (1, -1), 1)
    with mpmath.workdps(60):
        a = mpmath.exp(-mpmath.sqrt(2) / 10**6)
        truth2 = float((1 - a) / (1 + a))
    assert m.value() == pytest.approx(truth2, rel=1e-14, abs=0)


@pytest.mark.parametrize("name", ["single-head-dk4-2x4", "two-head-dk1-3x4", "gqa-four-heads-2x4"])
def test_eulers_number_is_written_exp_1_in_every_exact_string(cli, name):
    """Issue 20, D: JSON's exact strings wrote exp(1) as a bare 'e' (beside 'exp(-1)', 'exp(2)'), which a program
    reading them takes for a variable.  It is 'exp(1)' now, and every exact string of the forward and backward
    JSON reads back, through the answer grammar, as the float the JSON gives beside it."""
    import json
    import re

    code, out, _ = cli("explain", name, "--backward", "--format", "json")
    assert code == 0
    steps = json.loads(out)["steps"]
    exact = [(e, v) for s in steps for er, vr in zip(s["exact"], s["value"], strict=True)
             for e, v in zip(er, vr, strict=True)]
    assert any("exp(1)" in e for e, _ in exact)  # these exercises have a scaled score of 1
    assert not [e for e, _ in exact if re.search(r"(?<![a-z])e(?![a-z(])", e)]  # no bare e
    for e, v in exact:
        if v is not None:
            assert answers.parse_entry(e).value() == pytest.approx(v, rel=1e-12, abs=1e-15), e
