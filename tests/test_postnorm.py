"""Post-norm (issue 23, item 2): ``norm_placement: post`` normalizes ``X + output`` in a last step, ``out_norm``.

Checked against torch 2.13 (``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm`` with ``elementwise_affine=False``
on ``X + scaled_dot_product_attention(...)·W_O``), and the exact entries against the same formula evaluated
independently at 60 digits (mpmath, from the exercise's numbers).
"""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from tutor.exact.block import Rooted
from tutor.exercise import exercise_from_data
from tutor.exercise.catalog import resolve
from tutor.steps import keys, solve

torch = pytest.importorskip("torch")
f64 = torch.float64
BUNDLED = "postnorm-layernorm-3x2"

RMS = {"id": "post-rms", "title": "post-norm with RMSNorm", "x": [[1, 2], [0, -1], [2, 1]],
       "heads": [{"w_q": [[1, 0], [1, 1]], "w_k": [[0, 1], [1, 0]], "w_v": [[1, 1], [0, 2]]}],
       "w_o": [[1, 0], [0, 1]], "norm": "rmsnorm", "residual": True, "norm_placement": "post", "mask": "causal"}


def _t(m) -> torch.Tensor:
    return torch.tensor([[float(x) for x in row] for row in m], dtype=f64)


def _in_torch(ex) -> torch.Tensor:
    """``Norm(X + SDPA(X·W_Q, X·W_K, X·W_V)·W_O)`` in torch (one head, no bias)."""
    x, hd = _t(ex.x), ex.heads[0]
    mask = None if ex.allowed() is None else torch.tensor(ex.allowed())
    out = torch.nn.functional.scaled_dot_product_attention(
        (x @ _t(hd.w_q))[None], (x @ _t(hd.w_k))[None], (x @ _t(hd.w_v))[None], attn_mask=mask)[0] @ _t(ex.w_o)
    norm = (torch.nn.LayerNorm if ex.norm == "layernorm" else torch.nn.RMSNorm)(
        ex.d_model, eps=float(ex.norm_eps), elementwise_affine=False, dtype=f64)
    return norm(x + out)


def _in_mpmath(ex, digits: int = 60) -> list[list[mpmath.mpf]]:
    """The same at ``digits`` digits, from the exercise's fractions (one head, no bias, causal or no mask)."""
    with mpmath.workdps(digits + 20):
        def q(v: Fraction) -> mpmath.mpf:
            return mpmath.mpf(v.numerator) / v.denominator

        x = mpmath.matrix([[q(v) for v in row] for row in ex.x])
        hd = ex.heads[0]
        Q, K, V = (x * mpmath.matrix([[q(v) for v in row] for row in w]) for w in (hd.w_q, hd.w_k, hd.w_v))
        allowed = ex.allowed()
        out_rows = []
        for i in range(ex.L):
            live = [j for j in range(ex.L_k) if allowed is None or allowed[i][j]]
            s = {j: sum(Q[i, c] * K[j, c] for c in range(hd.d_k)) / mpmath.sqrt(hd.d_k) for j in live}
            z = mpmath.fsum(mpmath.exp(s[j]) for j in live)
            out_rows.append([mpmath.fsum(mpmath.exp(s[j]) / z * V[j, c] for j in live) for c in range(hd.d_v)])
        w_o = [[q(v) for v in row] for row in ex.w_o]
        r = [[x[i, c] + mpmath.fsum(out_rows[i][m] * w_o[m][c] for m in range(len(w_o))) for c in range(ex.d_model)]
             for i in range(ex.L)]
        eps = q(ex.norm_eps)
        res = []
        for row in r:
            mean = mpmath.fsum(row) / len(row) if ex.norm == "layernorm" else 0
            c = [v - mean for v in row]
            v = mpmath.fsum(t * t for t in c) / len(c) + eps
            res.append([t / mpmath.sqrt(v) for t in c])
        return res


@pytest.mark.parametrize("make", [lambda: resolve(BUNDLED), lambda: exercise_from_data(RMS)], ids=["layernorm", "rmsnorm"])
def test_post_norm_is_torchs_norm_of_x_plus_the_attention_output(make):
    ex = make()
    sol = solve(ex)
    assert [k for k, _ in keys(ex)][-2:] == ["residual", "out_norm"] and "x_norm" not in {k for k, _ in keys(ex)}
    step = sol.step("out_norm")
    np.testing.assert_allclose(np.array(step.value), _in_torch(ex).numpy(), rtol=1e-13, atol=1e-14)
    independent = _in_mpmath(ex)
    for i, row in enumerate(step.exact):
        for j, e in enumerate(row):
            assert abs(e.precise_value(50) - independent[i][j]) < mpmath.mpf(10) ** -45, (i, j, str(e))


def test_the_bundled_entries_keep_the_root_of_a_sum_of_exponentials_exact():
    step = solve(resolve(BUNDLED)).step("out_norm")
    assert all(isinstance(e, Rooted) for row in step.exact for e in row)
    text = str(step.exact[0][0])
    assert text.startswith("(") and ")/sqrt(" in text and "exp(" in text


def test_layernorm_of_two_entries_without_eps_is_exactly_plus_or_minus_one():
    """``[r1, r2] − mean = ±(r1 − r2)/2`` and ``var = ((r1 − r2)/2)²``: the entry is its own root, ±1 exactly."""
    data = dict(RMS, id="post-ln-2", norm="layernorm")
    ex = exercise_from_data(data)
    step = solve(ex).step("out_norm")
    assert {str(e) for row in step.exact for e in row} == {"1", "-1"}
    np.testing.assert_allclose(np.array(step.value), _in_torch(ex).numpy(), atol=1e-12)


def _practice_out_norm(cli, answer: str) -> str:
    n = len(keys(resolve(BUNDLED))) - 1
    code, out, _ = cli("practice", BUNDLED, input="skip\n" * n + answer + "\nquit\n", env={"COLUMNS": "200"})
    return out


def test_practice_grades_decimals_and_the_exact_form_at_many_digits(cli):
    step = solve(resolve(BUNDLED)).step("out_norm")
    decimals = "; ".join(" ".join(f"{v:.4f}" for v in row) for row in step.value)
    assert "right at the first try" in _practice_out_norm(cli, decimals).split("out_norm>")[-1]
    exact = "; ".join(" ".join(str(e).replace(" ", "") for e in row) for row in step.exact)
    assert "right at the first try" in _practice_out_norm(cli, exact).split("out_norm>")[-1]
    off = "; ".join(" ".join(f"{v + 1e-6:.8f}" for v in row) for row in step.value)
    assert "right at the first try" not in _practice_out_norm(cli, off).split("out_norm>")[-1]


@pytest.mark.parametrize(("variant", "said"), [
    ({"post_norm": "before_add"}, "You normalized X and then added the layer's output"),
    ({"norm_axis": 0}, "You normalized each column of X + output"),
    ({"residual": "none"}, "You left out the residual"),
])
def test_practice_names_the_post_norm_mistakes(cli, variant, said):
    from tutor.steps import Variant, replay

    wrong = replay(resolve(BUNDLED), Variant(**variant)).values[("out_norm", None)]
    out = _practice_out_norm(cli, "; ".join(" ".join(f"{v:.4f}" for v in row) for row in wrong))
    assert said in " ".join(out.split())


def test_check_names_the_norm_taken_before_the_sum(cli, tmp_path):
    from tutor.steps import Variant, replay

    wrong = replay(resolve(BUNDLED), Variant(post_norm="before_add")).values[("out_norm", None)]
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.6f}" for v in r) + "]" for r in wrong) + "]"
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {BUNDLED}\nout_norm: {rows}\n", encoding="utf-8")
    doc = json.loads(cli("check", str(sol_path), "--format", "json").out)
    assert doc["exit_code"] == 1
    assert [d["key"] for s in doc["steps"] for d in s["diagnoses"]] == ["postnorm_before_add"]
    right = solve(resolve(BUNDLED)).step("out_norm").value
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.6f}" for v in r) + "]" for r in right) + "]"
    sol_path.write_text(f"exercise: {BUNDLED}\nout_norm: {rows}\n", encoding="utf-8")
    assert json.loads(cli("check", str(sol_path), "--format", "json").out)["exit_code"] == 0


def test_a_solution_may_name_the_last_step_x_norm_as_the_shared_format_does(cli, tmp_path):
    """The shared v3 contract: with norm_placement post, x_norm normalizes the residual and comes last; a
    file written to it is graded as out_norm (right and wrong), and a pre-norm exercise's x_norm is its own."""
    from tutor.steps import Variant, replay

    def rows(m) -> str:
        return "[" + ", ".join("[" + ", ".join(f"{v:.6f}" for v in r) + "]" for r in m) + "]"

    sol_path = tmp_path / "sol.yaml"
    right = solve(resolve(BUNDLED)).step("out_norm").value
    sol_path.write_text(f"exercise: {BUNDLED}\nx_norm: {rows(right)}\n", encoding="utf-8")
    doc = json.loads(cli("check", str(sol_path), "--format", "json").out)
    assert doc["exit_code"] == 0 and [(s["id"], s["field"]) for s in doc["steps"]] == [("out_norm", "x_norm")]
    wrong = replay(resolve(BUNDLED), Variant(post_norm="before_add")).values[("out_norm", None)]
    sol_path.write_text(f"exercise: {BUNDLED}\nx_norm: {rows(wrong)}\n", encoding="utf-8")
    doc = json.loads(cli("check", str(sol_path), "--format", "json").out)
    assert doc["exit_code"] == 1
    assert [d["key"] for s in doc["steps"] for d in s["diagnoses"]] == ["postnorm_before_add"]


def test_a_row_of_x_plus_output_with_nothing_to_divide_by_is_one_line_and_exit_2(cli, tmp_path):
    """Every row of X is [c, c] and every row of V too: X + output has variance 0, and eps is 0."""
    data = {"id": "flat", "title": "flat", "x": [[1, 1], [2, 2]],
            "heads": [{"w_q": [[1, 0], [0, 1]], "w_k": [[1, 0], [0, 1]], "w_v": [[1, 1], [1, 1]]}],
            "w_o": [[1, 0], [0, 1]], "norm": "layernorm", "residual": True, "norm_placement": "post"}
    path = tmp_path / "flat.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("explain", str(path))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "row 1 of X + output has variance 0 and norm_eps is 0, so LayerNorm would divide by sqrt(0)" in err


def test_post_norm_without_a_residual_is_refused_at_its_field(cli, tmp_path):
    data = dict(RMS, id="no-res")
    del data["residual"]
    path = tmp_path / "no-res.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("validate", str(path))
    assert code == 2 and "norm_placement: post needs residual: true" in out + err


def test_explain_json_and_markdown_say_the_placement_and_the_step(cli):
    doc = json.loads(cli("explain", BUNDLED, "--format", "json").out)
    assert (doc["exercise"]["norm"], doc["exercise"]["norm_placement"], doc["exercise"]["residual"]) == \
        ("layernorm", "post", True)
    assert [s["id"] for s in doc["steps"]][-2:] == ["residual", "out_norm"]
    md = cli("explain", BUNDLED, "--format", "markdown").out
    assert "Post-norm out_norm = Norm(X + output)" in md and "Xiong et al. 2020" in md


def test_the_production_view_normalizes_the_sum_last(cli):
    code, out, _ = cli("explain", BUNDLED, env={"COLUMNS": "200"})
    assert code == 0
    view = out.split("Production view")[1]
    assert view.index("residual") < view.index("out_norm")
    assert "torch.nn.LayerNorm(D, eps=1/4, elementwise_affine=False)(x + out_proj)" in view
    assert "x_norm" not in view


def test_explain_in_chinese_names_post_norm(cli):
    code, out, _ = cli("explain", BUNDLED, "--lang", "zh", env={"COLUMNS": "200"})
    assert code == 0 and "后置归一化 out_norm = Norm(X + output)" in out and "Xiong et al. 2020 证明" in out


# --- new --norm-placement post ------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm, d_model", [("layernorm", 2), ("rmsnorm", 3), ("layernorm", 4)])
@pytest.mark.parametrize("seed", [1, 3])
def test_new_writes_a_post_norm_exercise_that_validates_solves_and_verifies(cli, norm, d_model, seed):
    from tutor.exercise import validate_text
    from tutor.production import verify

    r = cli("new", "--norm", norm, "--residual", "--norm-placement", "post", "--d-model", str(d_model),
            "--seed", str(seed))
    assert r.code == 0, r.err
    v = validate_text(r.out)
    assert v.ok and v.exercise is not None and v.exercise.post_norm and v.exercise.norm == norm
    assert "norm_placement: post" in r.out and "--norm-placement post" in r.out and "post-norm" in v.exercise.tags
    sol = solve(v.exercise)
    assert [s.id for s in sol.steps][-2:] == ["residual", "out_norm"]
    np.testing.assert_allclose(np.array(sol.step("out_norm").value), _in_torch(v.exercise).numpy(), atol=1e-12)
    verify(sol)


@pytest.mark.parametrize("args, words", [(["--norm-placement", "post"], "--norm-placement needs --norm"),
                                         (["--norm", "rmsnorm", "--norm-placement", "post"], "needs --residual")])
def test_new_refuses_a_post_norm_it_cannot_write_in_one_line(cli, args, words):
    r = cli("new", *args)
    assert r.code == 2 and words in r.err and "Traceback" not in r.err


def test_new_like_the_post_norm_exercise_keeps_its_placement(cli):
    from tutor.exercise import validate_text

    r = cli("new", "--like", BUNDLED, "--seed", "5")
    assert r.code == 0, r.err
    v = validate_text(r.out)
    assert v.ok and v.exercise is not None and v.exercise.post_norm and v.exercise.norm_eps == Fraction(1, 4)


def test_the_online_softmax_of_a_post_norm_exercise_is_walked(cli):
    """Post-norm leaves the heads as they are: ``--tiled`` walks their softmax (out_norm, after them, is not built)."""
    from tutor.flash.walk import tiled

    ex = resolve(BUNDLED)
    rows = tiled(ex, 2)
    weights = solve(ex).step("weights", 0)
    assert len(rows) == ex.L and all(r.equal for r in rows)
    assert np.allclose([[float(v) for v in r.o] for r in rows], np.array(solve(ex).step("head_output", 0).value))
    assert weights.shape == (ex.L, ex.L_k)
    code, out, _ = cli("explain", BUNDLED, "--tiled")
    assert code == 0 and "Online softmax" in out
