"""The pre-norm block (issue 23, item 2): ``norm``, ``norm_eps``, ``residual``, ``norm_placement``.

Every number is checked against PyTorch 2.13 (``torch.nn.RMSNorm``,
``torch.nn.LayerNorm(elementwise_affine=False)``, ``nn.MultiheadAttention``
written out) or against the shared vector ``v3-rmsnorm-block`` PyTorch
computed; every refusal is one line and exit 2; each named mistake is made
in torch from the exercise's own numbers and ``check`` must name it.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tutor.exact.block import Alg, row_factor
from tutor.exercise import exercise_from_data
from tutor.exercise.catalog import resolve
from tutor.numeric.norm import layer_norm, rms_norm
from tutor.steps import solve

from .test_misconceptions import diagnoses, keys_at, matrix, solution
from .test_torch_parity import require_torch

torch = require_torch()
f64 = torch.float64
HERE = Path(__file__).resolve().parent
BUNDLED = "prenorm-rmsnorm-3x2"


def _case() -> dict:
    return json.loads((HERE / "data" / "v3-rmsnorm-block.json").read_text())["case"]


def _t(m) -> torch.Tensor:
    return torch.tensor([[float(x) for x in row] for row in m], dtype=f64)


def _block_in_torch(ex) -> dict[str, torch.Tensor]:
    """The block written out in torch from the exercise's numbers: ``torch.nn.RMSNorm`` / ``LayerNorm`` with
    ``elementwise_affine=False`` and the exercise's eps, each head's softmax(Q·Kᵀ/√d_k)·V, concat, W_O, + X."""
    x = _t(ex.x)  # [L, d_model]
    eps = float(ex.norm_eps)
    if ex.norm == "rmsnorm":
        xn = torch.nn.RMSNorm(ex.d_model, eps=eps, elementwise_affine=False, dtype=f64)(x)
    elif ex.norm == "layernorm":
        xn = torch.nn.LayerNorm(ex.d_model, eps=eps, elementwise_affine=False, dtype=f64)(x)
    else:
        xn = x  # a residual alone
    allowed = None if ex.allowed() is None else torch.tensor(ex.allowed())
    outs = []
    for hd in ex.heads:
        def proj(w, b):
            return xn @ _t(w) + (torch.tensor([float(v) for v in b], dtype=f64) if b is not None else 0.0)
        q, k, v = proj(hd.w_q, hd.b_q), proj(hd.w_k, hd.b_k), proj(hd.w_v, hd.b_v)
        s = q @ k.T / math.sqrt(hd.d_k)
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        w = torch.nan_to_num(torch.softmax(s, dim=-1))  # a fully masked row: zeros
        outs.append(w @ v)
    out = torch.cat(outs, dim=-1)
    if ex.w_o is not None:
        out = out @ _t(ex.w_o)
    if ex.b_o is not None:
        out = out + torch.tensor([float(v) for v in ex.b_o], dtype=f64)
    return {"x_norm": xn, "output": out, "residual": x + out if ex.residual else out}


# --- the shared vector, exactly ------------------------------------------------------------------------


def test_the_shared_rmsnorm_vector_is_reproduced():
    case = _case()
    sol = solve(exercise_from_data(case["exercise"]))
    expected = case["expected"]
    for name in ("x_norm", "output", "residual"):
        np.testing.assert_allclose(sol.step(name).value, expected[name], rtol=1e-13, atol=1e-13, err_msg=name)
    for name in ("q", "k", "v", "weights", "head_output"):
        np.testing.assert_allclose(sol.step(name, 0).value, expected["heads"][0][name], rtol=1e-13, atol=1e-13,
                                   err_msg=name)
    xn = sol.step("x_norm")
    assert [[str(e) for e in row] for row in xn.exact] == [["3*sqrt(2)/5", "4*sqrt(2)/5"], ["1", "1"], ["0", "sqrt(2)"]]


def test_the_exact_forms_are_exact():
    """A weight's exact form, evaluated by sympy at 30 digits, is the float torch gives; two rows of scores
    carry different roots (the reason the structured softmax does not apply)."""
    import sympy

    sol = solve(exercise_from_data(_case()["exercise"]))
    w = sol.step("weights", 0)
    assert isinstance(w.exact[0][0], Alg)
    assert str(w.exact[0][0]) == "1/(1 + exp(7/5 - sqrt(2)) + exp(-sqrt(2)/5))"
    assert float(sympy.N(w.exact[0][0].to_sympy(), 30)) == pytest.approx(0.3650267452178989, abs=1e-15)
    scaled = [[str(e) for e in row] for row in sol.step("scaled", 0).exact]
    assert scaled[0] == ["sqrt(2)", "7/5", "4*sqrt(2)/5"]  # √2, 1, √2 in one row


def test_row_factor_is_one_over_the_square_root():
    for m in (Fraction(25, 2), Fraction(2), Fraction(1), Fraction(9, 4), Fraction(7, 12)):
        c, t = row_factor(m)
        assert float(c) * math.sqrt(t) == pytest.approx(1 / math.sqrt(m), rel=1e-15)
        assert c * c * t == 1 / m  # exactly


# --- PyTorch parity on generated cases ---------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, 1e-5, 0.25])
def test_the_numpy_norms_are_torch_s(eps):
    rng = np.random.default_rng(23)
    for shape in ((3, 4), (2, 5, 8), (1, 1, 6)):
        a = rng.normal(size=shape) * 3
        t = torch.tensor(a, dtype=f64)
        rms = torch.nn.RMSNorm(shape[-1], eps=eps, elementwise_affine=False, dtype=f64)(t)
        ln = torch.nn.LayerNorm(shape[-1], eps=eps, elementwise_affine=False, dtype=f64)(t)
        np.testing.assert_allclose(rms_norm(a, shape[-1], eps=eps), rms.numpy(), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(layer_norm(a, shape[-1], eps=eps), ln.numpy(), rtol=1e-13, atol=1e-13)
    a32 = rng.normal(size=(2, 3)).astype(np.float32)
    assert rms_norm(a32, 3).dtype == np.float32 and layer_norm(a32, 3).dtype == np.float32
    with pytest.raises(ValueError, match="normalized_shape"):
        rms_norm(a32, 4)


def _generated(seed: int, norm: str, eps: str) -> dict:
    rng = np.random.default_rng(seed)

    def m(r: int, c: int) -> list[list[int]]:
        return rng.integers(-3, 4, (r, c)).tolist()

    x = m(3, 3)
    for row in x:  # no row LayerNorm (or RMSNorm) cannot divide: distinct entries
        row[0], row[1] = row[1] + 1 if row[0] == row[1] else row[0], row[1]
        if len(set(row)) == 1:
            row[2] += 1
    return {"id": f"gen-{seed}", "title": "generated", "x": x, "norm": norm, "norm_eps": eps, "residual": True,
            "heads": [{"w_q": m(3, 2), "w_k": m(3, 2), "w_v": m(3, 2)} for _ in range(2)], "w_o": m(4, 3),
            "mask": "causal"}


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("seed", range(4))
def test_the_exact_block_is_torch_s(norm, seed):
    """The exact engine's x_norm, output and residual against torch on generated exercises, eps 0 and 1/8."""
    for eps in ("0", "1/8"):
        data = _generated(seed, norm, eps)
        ex = exercise_from_data(data)
        sol = solve(ex)
        want = _block_in_torch(ex)
        for name, tensor in want.items():
            np.testing.assert_allclose(sol.step(name).value, tensor.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=f"{norm} {seed} {eps} {name}")


def test_the_production_run_is_torch_s():
    from tutor.production.run import run_exercise

    ex = resolve(BUNDLED)
    run = run_exercise(ex)
    want = _block_in_torch(ex)
    np.testing.assert_allclose(run.x_norm, want["x_norm"].numpy(), rtol=1e-14)
    np.testing.assert_allclose(run.residual, want["residual"].numpy(), rtol=1e-14)


# --- the format: every refusal one line, exit 2 -------------------------------------------------------------


BASE = "id: b\ntitle: b\nx: [[3, 4], [1, -1]]\nheads: [{w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}]\n"


@pytest.mark.parametrize(("extra", "said"), [
    ("norm: rmsnorm\nnorm_placement: post\n", "norm_placement: post needs residual: true"),  # post-norm normalizes X + output
    ("norm_eps: 1/100\n", "norm_eps without norm"),
    ("norm: rmsnorm\nnorm_eps: -1\n", "norm_eps is -1: it must be 0 or more"),
    ("norm_placement: pre\n", "norm_placement without norm"),
    ("norm: layernorm\nx_kv: [[1, 2]]\n", "norm with x_kv is not built"),
    ("norm: rmsnorm\nalibi: true\nmask: causal\n", "norm with alibi is not built"),
    ("residual: true\n", "residual: true needs w_o"),
    ("residual: true\nw_o: [[1], [1]]\n", "residual: true needs d_out = d_model: x has 2 columns, the output 1"),
    ("norm: groupnorm\n", "norm"),
])
def test_a_bad_block_field_is_one_line_and_exit_2(cli, tmp_path, extra, said):
    path = tmp_path / "b.yaml"
    path.write_text(BASE + extra)
    code, out, err = cli("validate", str(path))
    assert code == 2, (out, err)
    assert said in out + err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(("norm", "row", "said"), [
    ("rmsnorm", "[0, 0]", "row 2 of x is all zeros"),
    ("layernorm", "[5, 5]", "row 2 of x has every entry equal"),
])
def test_a_row_the_norm_cannot_divide_is_named(cli, tmp_path, norm, row, said):
    path = tmp_path / "b.yaml"
    path.write_text(BASE.replace("[1, -1]", row) + f"norm: {norm}\n")
    code, out, err = cli("validate", str(path))
    assert code == 2 and said in out + err
    path.write_text(BASE.replace("[1, -1]", row) + f"norm: {norm}\nnorm_eps: 1/100\n")  # eps makes it divisible
    code, out, err = cli("validate", str(path))
    assert code == 0, (out, err)


def test_the_backward_pass_and_the_online_softmax_are_refused_in_one_line(cli):
    code, out, err = cli("explain", BUNDLED, "--backward")
    assert code == 2 and "backward pass through the pre-norm block" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("practice", BUNDLED, "--tiled", input="quit\n")
    assert code == 2 and "online softmax is not walked after a norm" in err and len(err.strip().splitlines()) == 1


# --- explain, verify, JSON, Chinese --------------------------------------------------------------------------


def test_explain_works_the_norm_out_first_and_says_why(cli):
    code, out, err = cli("explain", BUNDLED)
    assert code == 0, err
    assert out.index("Before the heads: the norm") < out.index("Head 1") < out.index("Residual X + output")
    assert "mean(x²) = (3² + 4²) / 2 = 25/2" in out
    assert "Q = X_norm·W_Q" in out
    flat = " ".join(out.split())
    assert "Zhang & Sennrich 2019" in flat and "Xiong et al. 2020" in flat and "2,000 steps" in flat


def test_explain_in_chinese(cli):
    code, out, err = cli("--lang", "zh", "explain", BUNDLED)
    assert code == 0, err
    assert "进入各头之前：归一化" in out and "残差连接 X + output" in out


def test_json_has_the_block_steps_and_verify_passes(cli):
    code, out, err = cli("explain", BUNDLED, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    ids = [s["id"] for s in doc["steps"]]
    assert ids[0] == "x_norm" and ids[-1] == "residual"
    from tutor.production import verify

    verify(solve(resolve(BUNDLED)))  # raises at the first step the batched layer disagrees on


# --- the mistakes, made in torch, named by check and by practice --------------------------------------------


def _mistaken() -> dict[str, torch.Tensor]:
    ex = resolve(BUNDLED)
    x = _t(ex.x)
    right = _block_in_torch(ex)
    cols = x / torch.sqrt((x * x).mean(dim=0, keepdim=True))  # each column over the tokens
    centred = x - x.mean(dim=-1, keepdim=True)  # RMSNorm with LayerNorm's mean subtracted
    meaned = centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True))
    return {"norm_columns": cols, "rmsnorm_mean": meaned, "residual_forgotten": right["output"],
            "residual_normed": right["x_norm"] + right["output"]}


@pytest.mark.parametrize(("key", "step"), [("norm_columns", "x_norm"), ("rmsnorm_mean", "x_norm"),
                                           ("residual_forgotten", "residual"), ("residual_normed", "residual")])
def test_check_names_each_block_mistake(cli, tmp_path, key, step):
    wrong = _mistaken()[key]
    found = diagnoses(cli, solution(tmp_path, BUNDLED, **{step: matrix(wrong, 4)}))
    assert keys_at(found, step, None) == [key]


def test_check_names_the_scaled_scores_cut_to_two_places_after_the_norm(cli, tmp_path):
    """By hand: X_norm = [[3√2/5, 4√2/5], [1, -1], [0, √2]], Q = [[7√2/5, 4√2/5], [0, -1], [√2, √2]],
    K = [[3√2/5, 7√2/5], [1, 0], [0, √2]], so Q·Kᵀ/√2 = [[49√2/25, 7/5, 4√2/5], [-7/5, 0, -1], [2√2, 1, √2]];
    cut to 2 places: 7/5 -> 1.40 and 1 -> 1.00 (both walks once cut a float or digits just below them,
    to 1.39 and 0.99, and missed the mistake).  The weights are torch's softmax of the cut scores."""
    ex = resolve(BUNDLED)
    xn = torch.nn.RMSNorm(2, eps=0.0, elementwise_affine=False, dtype=f64)(_t(ex.x))
    scaled = (xn @ _t(ex.heads[0].w_q)) @ (xn @ _t(ex.heads[0].w_k)).T / math.sqrt(2)
    r2 = math.sqrt(2)
    np.testing.assert_allclose(scaled.numpy(), [[49 * r2 / 25, 7 / 5, 4 * r2 / 5], [-7 / 5, 0, -1], [2 * r2, 1, r2]],
                               rtol=1e-14, atol=1e-14)
    cut = torch.tensor([[2.77, 1.40, 1.13], [-1.40, 0.0, -1.00], [2.82, 1.00, 1.41]], dtype=f64)
    found = diagnoses(cli, solution(tmp_path, BUNDLED, [{"weights": matrix(torch.softmax(cut, dim=-1), 4)}]))
    assert keys_at(found, "weights") == ["truncated_scaled"]


def test_practice_names_the_forgotten_residual(cli):
    out = _mistaken()["residual_forgotten"]
    typed = "; ".join(" ".join(f"{v:.4f}" for v in row) for row in out.tolist())
    code, text, err = cli("practice", BUNDLED, "--steps", "residual", input=f"{typed}\nquit\n")
    assert "You left out the residual" in " ".join(text.split()), text


# --- new --norm, --residual, --like -------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("--norm", "rmsnorm", "--residual"),
                                  ("--norm", "layernorm", "--d-model", "3", "--heads", "2", "--mask", "causal"),
                                  ("--residual", "--tokens", "2")])
def test_new_writes_a_valid_block_exercise(cli, tmp_path, argv):
    from tutor.exercise import load_exercise

    path = tmp_path / "new.yaml"
    code, out, err = cli("new", *argv, "--seed", "3", "-o", str(path))
    assert code == 0, err
    ex = load_exercise(str(path))
    assert ex.norm == (argv[1] if argv[0] == "--norm" else None)
    assert ex.residual == ("--residual" in argv)
    command = path.read_text().splitlines()[0]
    assert ("--norm " + argv[1] in command) == ex.has_norm and ("--residual" in command) == ex.residual
    want = _block_in_torch(ex)
    np.testing.assert_allclose(solve(ex).final.value, want["residual" if ex.residual else "output"].numpy(), rtol=1e-12)


def test_new_refuses_a_block_with_what_it_is_not_built_for(cli):
    code, out, err = cli("new", "--norm", "rmsnorm", "--cross", "2")
    assert code == 2 and "--norm is built for self-attention of format v1; it cannot go with --cross" in err


def test_new_like_keeps_the_block(cli, tmp_path):
    from tutor.exercise import load_exercise

    path = tmp_path / "like.yaml"
    code, out, err = cli("new", "--like", BUNDLED, "--seed", "4", "-o", str(path))
    assert code == 0, err
    ex = load_exercise(str(path))
    assert ex.norm == "rmsnorm" and ex.residual
    assert "scores are small integers" not in path.read_text()  # not true after a norm


def test_what_the_docs_say_of_torch_s_eps_holds():
    """docs/exercise-format.md and tutor/numeric/norm.py: ``torch.nn.RMSNorm`` with ``eps=None`` adds
    ``torch.finfo(dtype).eps``; ``torch.nn.LayerNorm``'s default eps is 1e-5 (the numpy mirror's too)."""
    import inspect

    x = torch.tensor([[1e-9, 2e-9]], dtype=f64)  # a mean square far below float64's eps: the eps shows
    got = torch.nn.RMSNorm(2, elementwise_affine=False, dtype=f64)(x)
    eps = torch.finfo(f64).eps
    assert torch.allclose(got, x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps), rtol=1e-12)
    assert not torch.allclose(got, x / torch.sqrt((x * x).mean(-1, keepdim=True)), rtol=1e-3)
    assert torch.nn.LayerNorm(3).eps == 1e-5 == inspect.signature(layer_norm).parameters["eps"].default


def test_every_exact_form_typed_back_is_graded_right_and_a_changed_one_wrong():
    """The JSON's exact texts are in the answer grammar: each one, typed as an answer, is judged right by the
    one grading rule; the same text with one exponent's sign flipped is judged wrong."""
    from tutor.answers.grading import judge
    from tutor.answers.grammar import parse_entry

    sol = solve(resolve(BUNDLED))
    for s in sol.steps:
        for row in s.exact:
            for e in row:
                assert judge(parse_entry(str(e)), e).right, (s.id, str(e))
    w = sol.step("weights", 0).exact[0][0]
    text = str(w)
    assert "exp(7/5 - 49*sqrt(2)/25)" in text
    assert not judge(parse_entry(text.replace("exp(7/5 - 49*sqrt(2)/25)", "exp(-7/5 + 49*sqrt(2)/25)")), w).right


def test_check_names_layernorm_over_the_columns(cli, tmp_path):
    name = "prenorm-layernorm-causal-3x3"
    x = _t(resolve(name).x)
    c = x - x.mean(dim=0, keepdim=True)
    wrong = c / torch.sqrt((c * c).mean(dim=0, keepdim=True))  # each column over the tokens
    assert torch.allclose(torch.nn.LayerNorm(3, elementwise_affine=False, dtype=f64)(x.T).T, wrong)
    found = diagnoses(cli, solution(tmp_path, name, x_norm=matrix(wrong, 4)))
    assert keys_at(found, "x_norm", None) == ["norm_columns"]
