"""The backward pass by hand: exact forms worked out in the test, the NumPy core against central differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from tutor.exact.grad import Grad
from tutor.exact.numbers import Rat
from tutor.exercise.catalog import resolve
from tutor.numeric import scaled_dot_product_attention
from tutor.numeric.backward import gradient_check, numerical_gradient
from tutor.production import layer_backward, upstream
from tutor.steps import solve
from tutor.steps.state import floats as _floats

BUNDLED = ["single-head-3x4", "two-head-causal-3x4", "cross-attention-2x3", "fully-masked-row-3x3", "padding-4x2",
           "two-head-fused-3x4", "two-head-dk1-3x4", "single-head-dk4-2x4"]


def test_the_classic_d_scaled_worked_out_by_hand():
    # single-head-3x4, upstream all ones: V = [[1,1],[2,2],[2,2]], so d_weights = 1·Vᵀ = [2, 4, 4] on every row.
    # Row t1: scaled = [√2, 2√2, 2√2]; with E = exp(√2), P = [1, E, E] / (1 + 2E).
    # rowsum(d_weights ∘ P) = (2 + 8E)/(1 + 2E); d_scaled[t1, t1] = P_1·(2 − (2 + 8E)/(1 + 2E)) = −4E/(1 + 2E)².
    E = sympy.exp(sympy.sqrt(2))
    want = {0: -4 * E / (1 + 2 * E) ** 2, 1: 2 * E / (1 + 2 * E) ** 2, 2: 2 * E / (1 + 2 * E) ** 2}
    step = solve(resolve("single-head-3x4"), backward=True).step("d_scaled", 0)
    for j, w in want.items():
        e = step.exact[0][j]
        assert isinstance(e, Grad)
        assert sympy.simplify(e.to_sympy() - w) == 0
        assert sympy.simplify(sympy.sympify(str(e).replace("^", "**")) - w) == 0  # the text is the same number
        assert math.isclose(e.value(), float(w), rel_tol=1e-14)
    assert str(step.exact[0][0]) == "-4*exp(sqrt(2))/(1 + 2*exp(sqrt(2)))^2"
    assert abs(sum(step.value[0])) < 1e-15  # a row of d_scaled sums to 0 (the softmax's outputs sum to 1)


def test_d_q_carries_the_scale_as_a_surd():
    # d_Q[t1, :] = d_scaled[t1, :]·K / √2 = (−4E·1 + 2E·2 + 2E·2)/(1 + 2E)² / √2 = 4E/(√2 (1 + 2E)²) = 2√2·E/(1 + 2E)²
    E = sympy.exp(sympy.sqrt(2))
    e = solve(resolve("single-head-3x4"), backward=True).step("d_q", 0).exact[0][0]
    assert sympy.simplify(e.to_sympy() - 2 * sympy.sqrt(2) * E / (1 + 2 * E) ** 2) == 0
    assert str(e) == "2*sqrt(2)*exp(sqrt(2))/(1 + 2*exp(sqrt(2)))^2"


def test_masked_entries_of_d_scaled_are_exactly_zero_and_a_fully_masked_row_is_zero():
    for name in ("two-head-causal-3x4", "fully-masked-row-3x3", "padding-4x2"):
        ex = resolve(name)
        sol = solve(ex, backward=True)
        allowed = ex.allowed()
        for h in range(ex.num_heads):
            step = sol.step("d_scaled", h)
            for i, row in enumerate(allowed):
                for j, ok in enumerate(row):
                    if not ok:
                        assert step.exact[i][j] == Rat(0), (name, h, i, j)
            for i, row in enumerate(allowed):
                if not any(row):
                    assert all(x == Rat(0) for x in sol.step("d_q", h).exact[i])


def test_the_bias_gradients_are_column_sums():
    sol = solve(resolve("two-head-fused-3x4"), backward=True)
    ex = sol.exercise
    for h in range(ex.num_heads):
        for b, src in (("d_b_q", "d_q"), ("d_b_k", "d_k"), ("d_b_v", "d_v")):
            if sol.get((b, h)) is not None:
                np.testing.assert_allclose(np.array(sol.step(b, h).value)[0], np.array(sol.step(src, h).value).sum(axis=0),
                                           rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_sdpa_backward_passes_a_central_difference_gradient_check(seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    dO = rng.normal(size=(2, 3, 3))
    mask = np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)  # row 3 attends to nothing
    assert gradient_check(q, k, v, dO) < 1e-7
    assert gradient_check(q, k, v, dO, mask) < 1e-7


def test_the_gradient_check_catches_a_wrong_gradient():
    # the check can fail: the gradient of Σ x² is 2x, and 3x is off by 50%
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    num = numerical_gradient(lambda t: float(np.sum(t * t)), x)
    np.testing.assert_allclose(num, 2 * x, rtol=1e-8)
    assert np.max(np.abs(num - 3 * x)) > 0.4


@pytest.mark.parametrize("name", BUNDLED)
def test_the_layer_backward_passes_a_central_difference_gradient_check_on_x(name):
    ex = resolve(name)
    g = layer_backward(ex)
    G = upstream(ex)

    def loss(x: np.ndarray) -> float:
        total = 0.0
        outs = []
        kv = _floats(ex.x_kv) if ex.is_cross else x
        mask = None if ex.allowed() is None else np.array(ex.allowed())
        for hd in ex.heads:
            bq = 0 if hd.b_q is None else _floats([hd.b_q])
            bk = 0 if hd.b_k is None else _floats([hd.b_k])
            bv = 0 if hd.b_v is None else _floats([hd.b_v])
            outs.append(scaled_dot_product_attention(x @ _floats(hd.w_q) + bq, kv @ _floats(hd.w_k) + bk, kv @ _floats(hd.w_v) + bv, mask))
        y = np.hstack(outs)
        if ex.w_o is not None:
            y = y @ _floats(ex.w_o)
        total = float(np.sum(G * y))
        return total

    num = numerical_gradient(loss, _floats(ex.x))
    np.testing.assert_allclose(g.d_x, num, rtol=1e-7, atol=1e-7)
