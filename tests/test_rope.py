"""RoPE by hand (issue 23, item 1): the field, the exact rotation, the steps q_rot/k_rot, and PyTorch as the oracle.

The expected values come from ``/work/shared/vectors/v3-cases.json`` (computed with torch 2.13 in float64)
copied in here, from a rotation written in torch in the test, and from ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tutor.answers import parse_entry
from tutor.answers.grading import judge
from tutor.base.errors import ExerciseError
from tutor.exact import rotary
from tutor.exact.numbers import Rat
from tutor.exercise.load import exercise_from_data, validate_text
from tutor.exercise.record import rope_thetas
from tutor.production import verify
from tutor.steps import solve

torch = pytest.importorskip("torch")

I2 = [[1, 0], [0, 1]]
INTERLEAVED = {
    "id": "v3-rope-interleaved", "title": "RoPE, interleaved pairs: two tokens, d_k = 2",
    "x": [[1, 0], [1, 0]], "heads": [{"w_q": I2, "w_k": I2, "w_v": I2}],
    "rope": {"base": 10000, "pairing": "interleaved"},
}
I4 = [[int(i == j) for j in range(4)] for i in range(4)]
HALF = {
    "id": "v3-rope-half", "title": "RoPE, rotate_half pairs: three tokens, d_k = 4, causal",
    "x": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]],
    "heads": [{"w_q": I4, "w_k": [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], "w_v": I4}],
    "mask": "causal", "rope": {"base": 10000, "pairing": "half"},
}
# the expected values of the two v3-rope cases (torch 2.13, float64), as the shared vectors give them
EXPECTED = {
    "v3-rope-interleaved": {
        "q_rot": [[1.0, 0.0], [0.5403023058681398, 0.8414709848078965]],
        "k_rot": [[1.0, 0.0], [0.5403023058681398, 0.8414709848078965]],
        "weights": [[0.5805557848615206, 0.4194442151384795], [0.4194442151384795, 0.5805557848615206]],
        "head_output": [[1.0, 0.0], [1.0, 0.0]],
    },
}


def _shared_case(id: str) -> dict | None:
    """The case of the shared vector file, when this machine has it (the test's copies stand otherwise)."""
    try:
        with open(Path(__file__).parent / "data" / "v3-cases.json", encoding="utf-8") as f:
            cases = json.load(f)["cases"]
    except OSError:
        return None
    return next((c for c in cases if c["exercise"]["id"] == id), None)


# --- a rotation written in torch: the oracle -------------------------------------------------------------------


def torch_rope(x: torch.Tensor, positions: list[int], base: float, pairing: str) -> torch.Tensor:
    """``x [n, d]`` turned as RoFormer §3.4.2 says, written out in torch (float64)."""
    n, d = x.shape
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    ang = torch.tensor(positions, dtype=torch.float64)[:, None] * theta[None, :]  # [n, d/2]
    cos, sin = torch.cos(ang), torch.sin(ang)
    if pairing == "interleaved":
        a, b = x[:, 0::2], x[:, 1::2]
        out = torch.empty_like(x)
        out[:, 0::2] = a * cos - b * sin
        out[:, 1::2] = a * sin + b * cos
        return out
    # rotate_half (GPT-NeoX, LLaMA): x·cos + rotate_half(x)·sin with cos, sin of [θ, θ]
    cos2, sin2 = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    rot = torch.cat([-x[:, d // 2:], x[:, : d // 2]], -1)
    return x * cos2 + rot * sin2


def torch_forward(data: dict) -> dict[str, list]:
    """Every head's q_rot, k_rot, head output, and the output, by torch: the rotation above and SDPA."""
    x = torch.tensor(data["x"], dtype=torch.float64)
    L = x.shape[0]
    rope = data["rope"]
    heads = []
    for h in data["heads"]:
        q = x @ torch.tensor(h["w_q"], dtype=torch.float64)
        k = x @ torch.tensor(h["w_k"], dtype=torch.float64)
        v = x @ torch.tensor(h["w_v"], dtype=torch.float64)
        q_rot = torch_rope(q, list(range(L)), rope["base"], rope["pairing"])
        k_rot = torch_rope(k, list(range(L)), rope["base"], rope["pairing"])
        out = torch.nn.functional.scaled_dot_product_attention(
            q_rot[None, None], k_rot[None, None], v[None, None], is_causal=data.get("mask") == "causal")[0, 0]
        heads.append({"q_rot": q_rot, "k_rot": k_rot, "head_output": out})
    concat = torch.cat([h["head_output"] for h in heads], -1)
    output = concat @ torch.tensor(data["w_o"], dtype=torch.float64) if "w_o" in data else concat
    return {"heads": heads, "output": output}


def _values(sol, id, head=None) -> np.ndarray:
    return np.array(sol.step(id, head).value)


# --- the shared vectors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [INTERLEAVED, HALF], ids=lambda d: d["id"])
def test_the_shared_v3_rope_cases(data):
    ex = exercise_from_data(data)
    sol = solve(ex)
    case = _shared_case(data["id"])
    expected = case["expected"]["heads"][0] if case else EXPECTED.get(data["id"])
    if expected is None:
        pytest.skip("the shared vector file is not on this machine")
    for id in ("q_rot", "k_rot", "weights", "head_output"):
        np.testing.assert_allclose(_values(sol, id, 0), np.array(expected[id]), rtol=0, atol=1e-12, err_msg=id)
    if case:
        np.testing.assert_allclose(np.array(sol.final.value), np.array(case["expected"]["output"]), atol=1e-12)
    verify(sol)  # and the decoder's path (numpy) agrees step by step


def test_interleaved_case_is_exact_in_cos_and_sin():
    sol = solve(exercise_from_data(INTERLEAVED))
    q_rot = sol.step("q_rot", 0)
    assert [[str(e) for e in row] for row in q_rot.exact] == [["1", "0"], ["cos(1)", "sin(1)"]]
    scores = sol.step("scores", 0)
    # q_rot[t2]·k_rot[t2] = cos²(1) + sin²(1) = 1 exactly; q_rot[t1]·k_rot[t2] = cos(1)
    assert [[str(e) for e in row] for row in scores.exact] == [["1", "cos(1)"], ["cos(1)", "1"]]
    assert isinstance(scores.exact[1][1], Rat)
    assert str(sol.step("scaled", 0).exact[0][1]) == "sqrt(2)*cos(1)/2"


def test_half_case_pairs_i_with_i_plus_half():
    sol = solve(exercise_from_data(HALF))
    q_rot = sol.step("q_rot", 0)
    # row t2 = position 1, Q = [0, 1, 1, 0]: pair 0 = (d1, d3) = [0, 1] turns by 1, pair 1 = (d2, d4) = [1, 0] by 1/100
    assert [str(e) for e in q_rot.exact[1]] == ["-sin(1)", "cos(1/100)", "cos(1)", "sin(1/100)"]


def test_a_learner_types_the_exact_forms():
    sol = solve(exercise_from_data(HALF))
    e = sol.step("q_rot", 0).exact[1][1]
    assert judge(parse_entry("cos(1/100)"), e).right
    assert judge(parse_entry("0.99995"), e).right
    assert not judge(parse_entry("cos(1/10)"), e).right
    assert not judge(parse_entry("sin(1/100)"), e).right
    s = sol.step("scores", 0).exact[2][1]  # a sum of cosines and sines, as the engine prints it
    assert judge(parse_entry(str(s)), s).right


# --- exact trigonometric polynomials -----------------------------------------------------------------------------


def test_products_turn_into_sums_exactly():
    c1, s1 = rotary.Trig.turn(Fraction(1), Fraction(0), Fraction(1))  # cos 1, sin 1
    assert str(c1 * c1 + s1 * s1) == "1"  # cos² + sin² = 1, decided on the coefficients
    assert str(c1 * c1) == "1/2 + cos(2)/2"
    assert str(s1 * c1) == "sin(2)/2"
    c, s = rotary.Trig.turn(Fraction(3), Fraction(-2), Fraction(-1, 3))  # a negative angle is folded
    assert c == rotary.Trig.turn(Fraction(3), Fraction(2), Fraction(1, 3))[0] and str(c) == "3*cos(1/3) - 2*sin(1/3)"
    for t in (c1 * c1, s1 * c1, c, s):
        assert abs(float(t.precise_value(30)) - t.value()) < 1e-15


@pytest.mark.parametrize("pairing", ["interleaved", "half"])
def test_the_score_depends_on_m_minus_n_only(pairing):
    """``(R_m q)·(R_n k)`` is the same exact value for every (m, n) at the same distance."""
    rng = random.Random(7)
    d_k = 4
    thetas = rope_thetas(10000, d_k)
    pairs = ((0, 1), (2, 3)) if pairing == "interleaved" else ((0, 2), (1, 3))
    q = [[Fraction(rng.randint(-3, 3)) for _ in range(d_k)]]
    k = [[Fraction(rng.randint(-3, 3)) for _ in range(d_k)]]
    for dist in (0, 1, 3):
        seen = {(rotary.rotate(q, [m + dist], thetas, pairs) @ rotary.rotate(k, [m], thetas, pairs).T).num[0][0]
                for m in range(5)}
        assert len(seen) == 1
    near = (rotary.rotate(q, [1], thetas, pairs) @ rotary.rotate(k, [0], thetas, pairs).T).num[0][0]
    far = (rotary.rotate(q, [2], thetas, pairs) @ rotary.rotate(k, [0], thetas, pairs).T).num[0][0]
    assert near != far or all(x == 0 for x in q[0])


def test_rational_angles_only():
    assert rope_thetas(10000, 2) == (Fraction(1),)
    assert rope_thetas(10000, 4) == (Fraction(1), Fraction(1, 100))
    assert rope_thetas(10000, 8) == (Fraction(1), Fraction(1, 10), Fraction(1, 100), Fraction(1, 1000))
    assert rope_thetas(10000, 6) is None and rope_thetas(10000, 3) is None
    assert rope_thetas(1000, 6) == (Fraction(1), Fraction(1, 10), Fraction(1, 100))


# --- parity with torch on generated exercises -----------------------------------------------------------------


def _generated(seed: int) -> dict:
    rng = random.Random(seed)
    d_k = rng.choice([2, 4, 8])
    L, d_model, H = rng.randint(1, 4), rng.randint(2, 4), rng.randint(1, 2)

    def m(r, c):
        return [[rng.randint(-2, 2) for _ in range(c)] for _ in range(r)]

    data = {"id": f"rope-gen-{seed}", "title": "generated", "x": m(L, d_model),
            "heads": [{"w_q": m(d_model, d_k), "w_k": m(d_model, d_k), "w_v": m(d_model, 2)} for _ in range(H)],
            "rope": {"base": 10000, "pairing": rng.choice(["interleaved", "half"])}}
    if rng.random() < 0.5:
        data["mask"] = "causal"
    if rng.random() < 0.5:
        data["w_o"] = m(2 * H, 2)
    return data


@pytest.mark.parametrize("seed", range(12))
def test_parity_with_a_rotation_written_in_torch_and_sdpa(seed):
    data = _generated(seed)
    sol = solve(exercise_from_data(data))
    ref = torch_forward(data)
    for h, head in enumerate(ref["heads"]):
        for id in ("q_rot", "k_rot", "head_output"):
            np.testing.assert_allclose(_values(sol, id, h), head[id].numpy(), rtol=1e-12, atol=1e-12, err_msg=id)
    np.testing.assert_allclose(np.array(sol.final.value), ref["output"].numpy(), rtol=1e-12, atol=1e-12)
    verify(sol)


def test_numeric_apply_rope_matches_torch():
    from tutor.numeric.rotary import apply_rope

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8))
    for pairing in ("interleaved", "half"):
        got = apply_rope(x, [3, 4, 5, 6, 7], base=500000.0, pairing=pairing)
        want = torch.stack([torch_rope(torch.tensor(x[i]), [3, 4, 5, 6, 7], 500000.0, pairing) for i in range(2)])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-13, atol=1e-13)


# --- the field and its refusals ------------------------------------------------------------------------------


def _yaml(rope: str, **extra: str) -> str:
    lines = ["id: r", "title: r", "x: [[1, 0, 1], [0, 1, 1]]", "heads:",
             "  - {w_q: [[1, 0, 1], [0, 1, 1], [1, 1, 0]], w_k: [[1, 0, 1], [0, 1, 1], [1, 1, 0]],"
             " w_v: [[1, 0], [0, 1], [1, 1]]}", f"rope: {rope}"]
    return "\n".join(lines + [f"{k}: {v}" for k, v in extra.items()]) + "\n"


@pytest.mark.parametrize("rope, extra, words", [
    ("{base: 10000}", {}, "d_k = 3"),
    ("{base: 1}", {}, "whole number from 2"),
    ("{pairing: sideways}", {}, "pairing"),
    ("{base: 10000, color: red}", {}, "color"),
])
def test_bad_rope_fields_are_named(rope, extra, words):
    v = validate_text(_yaml(rope, **extra))
    assert not v.ok
    assert any(words in p.message or words in p.field for p in v.problems), v.problems
    assert all(p.field.startswith("rope") for p in v.problems)


def _even(rope: str, **extra: str) -> str:
    text = ("id: r\ntitle: r\nx: [[1, 0], [0, 1]]\nheads:\n"
            "  - {w_q: [[1, 0, 0, 0, 1, 0], [0, 1, 0, 0, 0, 1]], w_k: [[1, 0, 0, 0, 1, 0], [0, 1, 0, 0, 0, 1]],"
            " w_v: [[1, 0], [0, 1]]}\n")
    return text + f"rope: {rope}\n" + "".join(f"{k}: {v}\n" for k, v in extra.items())


def test_an_irrational_angle_is_refused_at_the_base():
    v = validate_text(_even("{base: 10000}"))
    (p,) = v.problems
    assert p.field == "rope.base" and "d_k = 6" in p.message and p.line == 6
    assert validate_text(_even("{base: 1000}")).ok  # 1000 = 10³: θ = 1, 1/10, 1/100


def test_rope_with_a_bias_or_cross_attention_is_refused_not_computed():
    x = "x: [[1, 0], [0, 1]]\nheads:\n  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
    for tail, words in (("alibi: true\n", "alibi"), ("x_kv: [[1, 0]]\n", "x_kv")):
        v = validate_text(f"id: r\ntitle: r\n{x}rope: {{}}\n{tail}")
        assert not v.ok and any(words in p.message and p.field == "rope" for p in v.problems), v.problems



@pytest.mark.parametrize("tail, words", [
    ("mla: {w_dkv: [[1], [0]], heads: [{w_uk: [[1, 0]], w_uv: [[1, 0]]}]}\n", "rope with mla is not built"),
    ("norm: rmsnorm\n", "rope with norm is not built"),
    ("residual: true\nw_o: [[1, 0], [0, 1]]\n", "rope with residual is not built"),
])
def test_rope_with_mla_or_the_pre_norm_block_is_refused_in_one_line(cli, tmp_path, tail, words):
    """Merged beside MLA and the pre-norm block: DeepSeek-V2's decoupled RoPE key is not built, and after a norm Q and
    K carry a root per row, which the exact rotation does not take; one line at rope, exit 2, never wrong numbers."""
    heads = "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
    if tail.startswith("mla"):
        heads = "  - {w_q: [[1, 0], [0, 1]]}\n"
    text = f"id: r\ntitle: r\nx: [[1, 2], [0, 1]]\nheads:\n{heads}rope: {{}}\n{tail}"
    v = validate_text(text)
    assert not v.ok and [(p.field, words in p.message) for p in v.problems] == [("rope", True)], v.problems
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    r = cli("explain", str(path))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and words in r.err and "Traceback" not in r.err

def test_the_cli_refuses_in_one_line(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(_even("{base: 10000}"), encoding="utf-8")
    r = cli("explain", str(bad))
    assert r.code == 2 and "Traceback" not in r.err and "rope.base" in r.err


def test_explain_shows_each_pair_turned(cli, tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(json.dumps(HALF), encoding="utf-8")
    r = cli("explain", str(ok), env={"COLUMNS": "120"})
    assert r.code == 0, r.err
    assert "Q_rot = RoPE(Q)" in r.out and "scores = Q_rot·K_rotᵀ" in r.out
    assert "Q_rot[t2, d1] = 0·cos(1) − 1·sin(1) = −sin(1) ≈ −0.8415" in r.out  # the pair (d1, d3) = [0, 1] turned by 1
    assert "m − n" in r.out
    j = cli("explain", str(ok), "--format", "json")
    doc = json.loads(j.out)
    assert doc["exercise"]["rope"] == {"base": 10000, "pairing": "half"}
    assert [s["id"] for s in doc["steps"]][:7] == ["q", "k", "v", "q_rot", "k_rot", "scores", "scaled"]


def test_exercise_error_type_for_loaders():
    with pytest.raises(ExerciseError):
        exercise_from_data({**INTERLEAVED, "rope": {"base": 10000, "pairing": "diagonal"}})


def test_float_value_of_a_cancelling_trig_is_accurate():
    c, _ = rotary.Trig.turn(Fraction(1), Fraction(0), Fraction(1, 10**6))
    t = c - rotary.Trig(((Fraction(0), Fraction(1), Fraction(0)),))  # cos(1e-6) - 1 ≈ -5e-13
    assert math.isclose(t.value(), math.cos(1e-6) - 1, rel_tol=1e-3)
    assert math.isclose(t.value(), -0.5e-12, rel_tol=1e-6)


def test_the_scores_worked_out_in_cos_and_sin_are_exactly_the_entries():
    """``scores[b1, b1] = (−2·sin(1))·(cos(1) − sin(1)) + 2·cos(1)·(cos(1) + sin(1)) = 2``: each line's sum, read
    by the answer grammar, is exactly the entry; ``=`` only where no decimal was written."""
    from tutor.exercise.catalog import resolve
    from tutor.steps import KINDS

    sol = solve(resolve("rope-relative-4x2"))
    step = sol.step("scores", 0)
    pieces = KINDS["scores"].arithmetic(sol, step, 4)
    assert len(pieces) == 16
    for n, piece in enumerate(pieces):
        i, j = divmod(n, 4)
        line = piece.lines[0].replace("−", "-")
        written = line.split(" = ")[0].split(" ≈ ")[0]
        assert "." not in written
        assert judge(parse_entry(written), step.exact[i][j]).right, line
        # exact factors: the result follows "=" (and its decimal "≈"); a long exact form only its decimal
        assert (" = " in line) == (len(str(step.exact[i][j])) <= 16), line
    assert [str(e) for e in step.exact[1][:1] + step.exact[3][2:3]] == ["-2*sin(1)", "-2*sin(1)"]  # b1·a0 = b3·a2


# --- the mistakes RoPE invites, named by practice (diagnose) and check (solution files) -------------------------

ROPE_MISTAKES = {"pairing": "rope_pairing_mixed", "from_one": "rope_positions_from_one",
                 "no_two": "rope_theta_without_two", "rotate_v": "rope_v_rotated"}


def _wrong(data: dict, mistake: str) -> dict[str, np.ndarray]:
    """What a learner holding ``mistake`` writes for HALF's head, computed here in torch (not by attn-tutor)."""
    x = torch.tensor(data["x"], dtype=torch.float64)
    h = data["heads"][0]
    q, k, v = (x @ torch.tensor(h[w], dtype=torch.float64) for w in ("w_q", "w_k", "w_v"))
    L, d = q.shape
    pos = [m + 1 for m in range(L)] if mistake == "from_one" else list(range(L))
    pairing = data["rope"]["pairing"]
    if mistake == "pairing":
        pairing = "interleaved" if pairing == "half" else "half"
    base = float(data["rope"]["base"])
    if mistake == "no_two":  # θ_i = base^(−i/d): the same as base'^(−2i/d) with base' = √base
        base = math.sqrt(base)
    q_rot, k_rot = torch_rope(q, pos, base, pairing), torch_rope(k, pos, base, pairing)
    if mistake == "rotate_v":
        v = torch_rope(v, pos, base, pairing)
    out = torch.nn.functional.scaled_dot_product_attention(q_rot[None], k_rot[None], v[None], is_causal=True)[0]
    return {"q_rot": q_rot.numpy(), "k_rot": k_rot.numpy(), "v": v.numpy(), "head_output": out.numpy()}


@pytest.mark.parametrize("mistake", sorted(ROPE_MISTAKES))
def test_practice_names_each_rope_mistake(mistake):
    from tutor.mistakes.diagnose import diagnose

    sol = solve(exercise_from_data(HALF))
    wrong = _wrong(HALF, mistake)
    shown = [s for s in ("q_rot", "k_rot", "v", "head_output")
             if not np.allclose(wrong[s], _values(sol, s, 0), atol=1e-9)]
    assert shown  # the mistake changes something on this exercise
    for step in shown:
        keys_ = [d.key for d in diagnose(sol, step, 0, wrong[step].tolist(), tolerance=1e-6)]
        assert keys_[:1] == [ROPE_MISTAKES[mistake]], (step, keys_)


def test_positions_from_one_leave_the_scores_as_they_are():
    """Every position shifted by one: Q_rot and K_rot change, the scores (m − n) do not."""
    sol = solve(exercise_from_data(HALF))
    wrong = _wrong(HALF, "from_one")
    assert not np.allclose(wrong["q_rot"], _values(sol, "q_rot", 0))
    np.testing.assert_allclose(wrong["head_output"], _values(sol, "head_output", 0), atol=1e-12)


@pytest.mark.parametrize("mistake", ["pairing", "no_two"])
def test_check_names_a_rope_mistake_in_a_solution_file(cli, tmp_path, mistake):
    ex_path = tmp_path / "half.yaml"
    ex_path.write_text(json.dumps(HALF), encoding="utf-8")
    wrong = _wrong(HALF, mistake)
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.6f}" for v in r) + "]" for r in wrong["q_rot"]) + "]"
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {ex_path}\nheads:\n  - q_rot: {rows}\n", encoding="utf-8")
    r = cli("check", str(sol_path), "--format", "json")
    doc = json.loads(r.out)
    assert doc["exit_code"] == 1
    assert [d["key"] for s in doc["steps"] for d in s["diagnoses"]] == [ROPE_MISTAKES[mistake]]


# --- a decode step: the cache holds keys already rotated --------------------------------------------------------

DECODE = {
    "id": "rope-decode", "title": "a decode step with RoPE", "x": [[1, 0, 1], [0, 1, 1]],
    "heads": [{"w_q": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], "w_k": [[0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]],
               "w_v": [[1, 0], [0, 1], [1, 1]]}],
    "cache": [{"k": [["1/2", -1, 0, 2], [1, "3/4", -1, 0]], "v": [[1, 2], [0, -1]]}],
    "mask": "causal_lower_right", "rope": {"base": 10000, "pairing": "half"},
}


def test_a_decode_step_turns_only_the_new_keys_at_positions_from_l_past():
    sol = solve(exercise_from_data(DECODE))
    x = torch.tensor(DECODE["x"], dtype=torch.float64)
    h = DECODE["heads"][0]
    q, k_new, v_new = (x @ torch.tensor(h[w], dtype=torch.float64) for w in ("w_q", "w_k", "w_v"))
    cache = DECODE["cache"][0]
    k_cache = torch.tensor([[float(Fraction(str(e))) for e in r] for r in cache["k"]], dtype=torch.float64)
    v_cache = torch.tensor(cache["v"], dtype=torch.float64)
    q_rot = torch_rope(q, [2, 3], 10000.0, "half")  # the new tokens continue from L_past = 2
    k_rot = torch.cat([k_cache, torch_rope(k_new, [2, 3], 10000.0, "half")])  # the cached keys as stored
    v = torch.cat([v_cache, v_new])
    from torch.nn.attention.bias import causal_lower_right

    out = torch.nn.functional.scaled_dot_product_attention(q_rot[None], k_rot[None], v[None],
                                                           attn_mask=causal_lower_right(2, 4))[0]
    np.testing.assert_allclose(_values(sol, "q_rot", 0), q_rot.numpy(), atol=1e-12)
    np.testing.assert_allclose(_values(sol, "k_rot", 0), k_rot.numpy(), atol=1e-12)
    np.testing.assert_allclose(_values(sol, "head_output", 0), out.numpy(), atol=1e-12)
    assert [str(e) for e in sol.step("k_rot", 0).exact[0]] == ["1/2", "-1", "0", "2"]  # not turned again
    verify(sol)


def test_a_decode_step_explains_its_cached_keys(cli, tmp_path):
    path = tmp_path / "decode.yaml"
    path.write_text(json.dumps(DECODE), encoding="utf-8")
    r = cli("explain", str(path), env={"COLUMNS": "120"})
    assert r.code == 0, r.err
    assert "stored already rotated at its own position" in r.out and "positions 2 and on" in r.out
    bad = dict(DECODE, past_x=[[1, 0, 0], [0, 1, 0]])
    v = validate_text(json.dumps(bad))
    assert any(p.field == "past_x" and "rotated" in p.message for p in v.problems)


def test_check_carries_a_decode_steps_slack_through_the_rotation():
    from tutor.steps import replay

    ex = exercise_from_data(DECODE)
    sol = solve(ex)
    carried = replay(ex, given=lambda key: None)
    for s in sol.steps:
        value, slack = carried.computed[s.key]
        assert slack.shape == value.shape and np.all(np.isfinite(slack)), s.key
        np.testing.assert_allclose(value, np.array(s.value), atol=1e-12, err_msg=str(s.key))


# --- new --rope ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairing, d_k", [("interleaved", 2), ("half", 4), ("half", 8)])
def test_new_writes_a_rope_exercise_that_validates_and_solves(cli, pairing, d_k):
    r = cli("new", "--rope", pairing, "--d-k", str(d_k), "--tokens", "3", "--d-model", "3", "--seed", "4")
    assert r.code == 0, r.err
    v = validate_text(r.out)
    assert v.ok and v.exercise is not None and v.exercise.rope is not None
    assert (v.exercise.rope.base, v.exercise.rope.pairing) == (10000, pairing)
    assert f"--rope {pairing}" in r.out and "Q_rot K_rot^T" in r.out
    sol = solve(v.exercise)
    assert [s.id for s in sol.steps][3:5] == ["q_rot", "k_rot"]
    verify(sol)


@pytest.mark.parametrize("args, words", [(["--d-k", "3"], "d_k = 2, 4 or 8"), (["--alibi"], "--alibi"),
                                         (["--cross", "2"], "--cross"), (["--cache", "2"], "--cache")])
def test_new_refuses_rope_where_it_cannot_be_exact_or_is_not_built(cli, args, words):
    r = cli("new", "--rope", "half", *args)
    assert r.code == 2 and words in r.err and "Traceback" not in r.err


def test_new_like_a_rope_exercise_keeps_the_rotation(cli):
    r = cli("new", "--like", "rope-relative-4x2", "--seed", "3")
    assert r.code == 0, r.err
    v = validate_text(r.out)
    assert v.ok and v.exercise is not None and v.exercise.rope is not None
    assert "scores are small integers" not in r.out  # RoPE's scores are cosines and sines


@pytest.mark.parametrize("data", [HALF, DECODE], ids=["half", "decode"])
def test_the_production_view_turns_q_and_k_with_the_shapes_the_run_makes(data):
    from tutor.production import exercise_trace, run_exercise

    ex = exercise_from_data(data)
    run = run_exercise(ex)
    shapes = {s.name: s.shape for s in exercise_trace(ex)}
    names = [s.name for s in exercise_trace(ex)]
    assert names.index("q_rot") < names.index("scores") and names.index("k_rot") < names.index("scores")
    assert shapes["q_rot"] == (1, *run.q_rot.shape)
    assert shapes["k_rot"] == (1, ex.num_kv_heads, ex.L, run.k_rot.shape[-1])  # the new keys, before a cache
    assert shapes["scores"] == (1, *run.scores.shape)


def test_the_bundled_rotate_half_exercise_is_the_shared_torch_case():
    from tutor.exercise.catalog import resolve

    ex, shared = resolve("rope-half-causal-3x4"), exercise_from_data(HALF)
    assert (ex.x, ex.heads, ex.mask, ex.rope) == (shared.x, shared.heads, shared.mask, shared.rope)


# --- fix-rope F1: the two layouts mixed (the public report "rotate_half against interleaved frequencies") -------

MIXES = {"half_ri": "rope_half_interleaved_angles", "inter_cat": "rope_interleaved_half_angles"}


def torch_mixed(x: torch.Tensor, positions: list[int], base: float, mix: str) -> torch.Tensor:
    """``x·cos + rot(x)·sin`` in torch with the angles laid out for the other layout: ``half_ri`` rotate_half with
    ``repeat_interleave``'d angles, ``inter_cat`` the interleaved swap with ``cat``'d angles."""
    n, d = x.shape
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    ang = torch.tensor(positions, dtype=torch.float64)[:, None] * theta[None, :]  # [n, d/2]
    if mix == "half_ri":
        full = ang.repeat_interleave(2, dim=-1)  # θ_0, θ_0, θ_1, θ_1
        rot = torch.cat([-x[:, d // 2:], x[:, : d // 2]], -1)  # rotate_half
    else:
        full = torch.cat([ang, ang], -1)  # θ_0, θ_1, θ_0, θ_1
        rot = torch.stack([-x[:, 1::2], x[:, 0::2]], -1).flatten(-2)  # rotate_every_two
    return x * full.cos() + rot * full.sin()


def _mixed_steps(data: dict, mix: str) -> dict[str, np.ndarray]:
    x = torch.tensor(data["x"], dtype=torch.float64)
    h = data["heads"][0]
    q, k, v = (x @ torch.tensor(h[w], dtype=torch.float64) for w in ("w_q", "w_k", "w_v"))
    pos = list(range(x.shape[0]))
    base = float(data["rope"]["base"])
    q_rot, k_rot = torch_mixed(q, pos, base, mix), torch_mixed(k, pos, base, mix)
    out = torch.nn.functional.scaled_dot_product_attention(q_rot[None], k_rot[None], v[None], is_causal=True)[0]
    return {"q_rot": q_rot.numpy(), "k_rot": k_rot.numpy(), "head_output": out.numpy()}


HALF_AS_INTERLEAVED = {**HALF, "id": "v3-rope-inter4", "rope": {"base": 10000, "pairing": "interleaved"}}


@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("data", [HALF, HALF_AS_INTERLEAVED], ids=["half", "interleaved"])
def test_practice_names_the_two_layouts_mixed(data, mix):
    """Either mix, on an exercise of either pairing: named at Q_rot, K_rot and the head's output, and not as the
    other pairing (the trial's answers got "No known misconception explains it")."""
    from tutor.mistakes.diagnose import diagnose

    sol = solve(exercise_from_data(data))
    wrong = _mixed_steps(data, mix)
    for step in ("q_rot", "k_rot", "head_output"):
        assert not np.allclose(wrong[step], _values(sol, step, 0), atol=1e-6), step
        keys_ = [d.key for d in diagnose(sol, step, 0, wrong[step].tolist(), tolerance=1e-6)]
        assert keys_ == [MIXES[mix]], (step, keys_)


def test_the_trials_mixed_answer_is_named_in_practice_and_in_chinese():
    """The trial's practice answer for Q_rot (rotate_half with repeat_interleave'd angles), typed as exact forms."""
    from tutor.answers import parse_matrix
    from tutor.base.messages import use_language
    from tutor.exercise.catalog import resolve
    from tutor.mistakes.diagnose import diagnose

    sol = solve(resolve("rope-half-causal-3x4"))
    typed = parse_matrix("1 0 0 1; -sin(1) cos(1) cos(1/100) sin(1/100); cos(2) cos(2) sin(1/50) sin(1/50)")
    want = _mixed_steps(HALF, "half_ri")["q_rot"]
    np.testing.assert_allclose([[float(e.value()) for e in r] for r in typed], want, atol=1e-12)  # torch agrees
    found = diagnose(sol, "q_rot", 0, want.tolist(), tolerance=1e-9)
    assert [d.key for d in found] == ["rope_half_interleaved_angles"]
    assert "θ_0, θ_0, θ_1, θ_1" in str(found[0].message) and "pairs the dimensions half" in str(found[0].message)
    with use_language("zh"):
        assert "混用了 RoPE 的两种布局" in str(found[0].message)


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_check_names_the_two_layouts_mixed_in_a_solution_file(cli, tmp_path, mix):
    wrong = _mixed_steps(HALF, mix)
    text = "exercise: rope-half-causal-3x4\n" + "".join(
        f"{s}: [" + ", ".join("[" + ", ".join(f"{v:.4f}" for v in r) + "]" for r in wrong[s]) + "]\n"
        for s in ("q_rot", "k_rot"))
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(text, encoding="utf-8")
    r = cli("check", str(sol_path), "--format", "json")
    doc = json.loads(r.out)
    assert doc["exit_code"] == 1
    assert {d["key"] for s in doc["steps"] for d in s["diagnoses"]} == {MIXES[mix]}


def test_d_k_2_cannot_show_the_layouts_mixed():
    """One pair and one angle: both layouts are the same, so the mix gives the right Q_rot (invisible says so)."""
    from tutor.exercise.catalog import resolve
    from tutor.mistakes.invisible import invisible

    sol = solve(resolve("rope-relative-4x2"))
    hidden = {(f.key, f.step[0]) for f in invisible(sol, list(MIXES.values()))}
    assert {(k, s) for k in MIXES.values() for s in ("q_rot", "k_rot")} <= hidden
    sol4 = solve(resolve("rope-half-causal-3x4"))
    assert not {(f.key, f.step[0]) for f in invisible(sol4, list(MIXES.values()))} & {
        (k, s) for k in MIXES.values() for s in ("q_rot", "k_rot")}


# --- fix-rope F17: stats and practice never recommend an exercise where the learner's mistake cannot show ------


def _trial_store(path: Path, mistake: str | None):
    """The trial's progress: Q, K, V right on rope-half-causal-3x4, Q_rot wrong then shown, K_rot wrong with
    ``mistake`` (or with no mistake named)."""
    from tutor.store import Attempt, Store

    store = Store.open(path)
    s = store.begin_session("rope-half-causal-3x4", mode="matrix", tolerance=None)
    for step in ("q", "k", "v"):
        store.record(s, Attempt("rope-half-causal-3x4", step, 0, "correct", 1))
    store.record(s, Attempt("rope-half-causal-3x4", "q_rot", 0, "wrong", 1))
    store.record(s, Attempt("rope-half-causal-3x4", "q_rot", 0, "shown", 2))
    store.record(s, Attempt("rope-half-causal-3x4", "k_rot", 0, "wrong", 1, 0, (mistake,) if mistake else ()))
    store.end_session(s)
    return store


@pytest.mark.parametrize("mistake, want", [
    ("rope_pairing_mixed", "rope-half-causal-3x4"),  # d_k = 2 is one pair: both pairings the same
    ("rope_half_interleaved_angles", "rope-half-causal-3x4"),  # one angle: both layouts the same
    ("rope_positions_from_one", "rope-relative-4x2"),  # shows with d_k = 2: the easier exercise stays
    (None, "rope-relative-4x2"),
])
def test_the_weak_rotation_is_practised_where_the_mistake_can_show(tmp_path, mistake, want):
    """The trial: Q_rot the weakest step, the other pairing made at K_rot (it turns Q_rot too); the recommended
    exercise was rope-relative-4x2, whose d_k = 2 cannot show it."""
    from tutor.practice.plan import recommendation

    with _trial_store(tmp_path / "p.sqlite3", mistake) as store:
        _, rec = recommendation(store)
    assert rec is not None and (rec.step, rec.exercise) == ("q_rot", want)


def test_stats_names_the_exercise_that_shows_the_pairing(cli, tmp_path):
    _trial_store(tmp_path / "progress.sqlite3", "rope_pairing_mixed").close()
    r = cli("stats", env={"ATTN_TUTOR_HOME": str(tmp_path), "COLUMNS": "120"})
    assert r.code == 0, r.err
    assert "RoPE paired the other way (the other layout's pairs)" in r.out and "pairings mixed" not in r.out
    assert "Practise next: q_rot, your weakest step (0 of 2 right), with rope-half-causal-3x4:" in r.out


# --- fix-rope F5: no "cut off instead of rounded" on entries a named mistake explains ------------------------------


def _rotv_output() -> np.ndarray:
    """The head's output with V rotated too, by torch, each entry rounded right to 4 places; at least one of them
    looks like the right value cut off (what made the trial's note fire)."""
    from tutor.answers import judge as judge_entry

    got = np.round(_wrong(HALF, "rotate_v")["head_output"], 4)
    sol = solve(exercise_from_data(HALF))
    step = sol.step("head_output", 0)
    assert any(judge_entry(parse_entry(f"{got[i, j]:.4f}"), step.exact[i][j]).truncated
               for i in range(got.shape[0]) for j in range(got.shape[1]))
    return got


def test_check_says_no_cut_off_where_the_named_mistake_explains_the_decimals(cli, tmp_path):
    got = _rotv_output()
    (tmp_path / "half.yaml").write_text(json.dumps(HALF), encoding="utf-8")
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.4f}" for v in r) + "]" for r in got) + "]"
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {tmp_path / 'half.yaml'}\nheads:\n  - head_output: {rows}\n", encoding="utf-8")
    doc = json.loads(cli("check", str(sol_path), "--format", "json").out)
    (step,) = doc["steps"]
    assert [d["key"] for d in step["diagnoses"]] == ["rope_v_rotated"]
    assert step["notes"] == []
    # a sibling: the right values with that entry cut off, which no mistake explains, keep the note
    right = _values(solve(exercise_from_data(HALF)), "head_output", 0)
    rows2 = [[f"{v:.4f}" for v in r] for r in right]
    rows2[1][1] = f"{math.trunc(right[1, 1] * 10**4) / 10**4:.4f}"
    assert rows2[1][1] != f"{right[1, 1]:.4f}"
    sol_path.write_text(f"exercise: {tmp_path / 'half.yaml'}\nheads:\n  - head_output: [" +
                        ", ".join("[" + ", ".join(r) + "]" for r in rows2) + "]\n", encoding="utf-8")
    step = json.loads(cli("check", str(sol_path), "--format", "json").out)["steps"][0]
    assert [(n["key"], n["cells"]) for n in step["notes"]] == [("truncated_decimal", [[1, 1]])]


def test_practice_says_no_cut_off_where_the_named_mistake_explains_the_decimals(cli, tmp_path):
    got = _rotv_output()
    (tmp_path / "half.yaml").write_text(json.dumps(HALF), encoding="utf-8")
    typed = "; ".join(" ".join(f"{v:.4f}" for v in r) for r in got)
    r = cli("practice", str(tmp_path / "half.yaml"), "--steps", "head_output", input=typed + "\nquit\n",
            env={"COLUMNS": "200", "ATTN_TUTOR_HOME": str(tmp_path)})
    assert "You turned V too" in r.out, r.out
    assert "cut off instead of rounded" not in r.out


# --- fix-rope F2: practice says the pairing at Q_rot and K_rot, as explain does ----------------------------------


@pytest.mark.parametrize("id, pairing", [("rope-half-causal-3x4", "Pairing half: dimensions (i, i + d_k/2)"),
                                         ("rope-relative-4x2", "Pairing interleaved: dimensions (2i, 2i+1)")])
def test_practice_states_the_pairing_in_the_prompt_and_the_first_hint(cli, tmp_path, id, pairing):
    env = {"COLUMNS": "200", "ATTN_TUTOR_HOME": str(tmp_path)}
    r = cli("practice", id, "--steps", "q_rot,k_rot", input="hint\nskip\nquit\n", env=env)
    prompt = r.out.split("Step 1 of 2")[1].split("Q_rot>")[0]
    assert pairing in prompt, r.out
    hint = next(line for line in r.out.splitlines() if line.startswith("Hint: "))
    assert pairing in hint
    assert pairing in r.out.split("Step 2 of 2")[1]  # K_rot too
    explained = cli("explain", id, env=env).out
    assert pairing in explained  # the same sentence explain prints
    r = cli("--lang", "zh", "practice", id, "--steps", "q_rot", input="quit\n", env=env)
    assert ("配对方式 half：维度 (i, i + d_k/2)" if "half" in pairing else "配对方式 interleaved：维度 (2i, 2i+1)") in r.out


def test_practice_says_no_pairing_at_other_steps(cli, tmp_path):
    r = cli("practice", "rope-half-causal-3x4", "--steps", "scores", input="quit\n",
            env={"COLUMNS": "200", "ATTN_TUTOR_HOME": str(tmp_path)})
    assert "Pairing" not in r.out


# --- fix-rope F14: RoPE with attention sinks numbers positions by the text, and says it is not StreamingLLM's ---


@pytest.mark.parametrize("sinks", [1, 0])
def test_rope_with_sinks_says_its_positions_are_the_texts(cli, tmp_path, sinks):
    path = tmp_path / "rws.yaml"
    args = ["new", "--rope", "half", "--d-k", "4", "--window", "2", "--tokens", "4", "--seed", "2", "-o", str(path)]
    r = cli(*args, *(["--sinks", str(sinks)] if sinks else []))
    assert r.code == 0, r.err
    said = "this file does not" in path.read_text(encoding="utf-8")
    assert said == bool(sinks)
    env = {"COLUMNS": "400"}
    explained = cli("explain", str(path), env=env).out
    assert ("StreamingLLM (Xiao et al. 2023, §3.2) numbers positions within the cache instead" in explained) == bool(sinks)
    r = cli("validate", str(path), env=env)
    assert r.code == 0
    assert ("warning: rope: with attention sinks this exercise numbers positions by the text" in r.out + r.err) == bool(sinks)
    zh = cli("--lang", "zh", "explain", str(path), env=env).out
    assert ("StreamingLLM（Xiao et al. 2023，§3.2）则按缓存内的位置编号" in zh) == bool(sinks)
    if sinks:  # what the sentence says: the sink key (t1, position 0) and the last query (position 3) are 3 apart
        from tutor.exercise.load import load_exercise

        ex = load_exercise(str(path))
        assert ex.sinks == 1 and ex.key_positions[0] == 0 and ex.query_positions[-1] == 3


# --- fix-rope F20: a bare integer is an exact form in practice as in check ---------------------------------------



@pytest.mark.parametrize("written, cell, value", [("0", (2, 0), "cos(2)"), ("1", (1, 1), "cos(1/100)")])
def test_a_whole_number_is_graded_alike_by_check_and_practice(cli, tmp_path, written, cell, value):
    """Q_rot of rope-half-causal-3x4 right but one entry written as a whole number: 0 for cos(2) ≈ −0.4161 (the
    trial: "too coarse" in practice, wrong in check), 1 for cos(1/100) ≈ 0.99995 (wrong in check): wrong in both."""
    sol = solve(exercise_from_data(HALF))
    right = _values(sol, "q_rot", 0)
    i, j = cell
    assert abs(right[i, j] - float(written)) < 0.5 and right[i, j] != float(written)
    np.testing.assert_allclose(right[i, j], {"cos(2)": math.cos(2), "cos(1/100)": math.cos(1 / 100)}[value], atol=1e-15)
    rows = [[f"{v:.6f}" for v in r] for r in right]
    rows[i][j] = written
    (tmp_path / "half.yaml").write_text(json.dumps(HALF), encoding="utf-8")
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {tmp_path / 'half.yaml'}\nheads:\n  - q_rot: [" +
                        ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]\n", encoding="utf-8")
    doc = json.loads(cli("check", str(sol_path), "--format", "json").out)
    assert doc["exit_code"] == 1 and doc["steps"][0]["wrong_cells"] == [[i, j]]
    typed = "; ".join(" ".join(r) for r in rows)
    r = cli("practice", str(tmp_path / "half.yaml"), "--steps", "q_rot", input=typed + "\nquit\n",
            env={"COLUMNS": "200", "ATTN_TUTOR_HOME": str(tmp_path)})
    assert "1 of 12 entries wrong" in r.out and "Give at least 2 decimals" not in r.out, r.out


def test_the_help_says_a_whole_number_is_exact(cli):
    r = cli("practice", "--help", env={"COLUMNS": "400"})
    assert "an exact form (a whole number such as 1, 1/3, sqrt(2)/2, -inf) must be exactly equal: 1 for 0.9965 is " \
           "wrong, write 1.00" in " ".join(r.out.split())


# --- fix-rope F19: a rope field without a pairing says the one it took -------------------------------------------


@pytest.mark.parametrize("rope, warned", [("{}", True), ("{base: 10000}", True), ("{pairing: interleaved}", False),
                                          ("{base: 10000, pairing: half}", False)])
def test_validate_names_the_pairing_a_rope_field_left_out(cli, tmp_path, rope, warned):
    path = tmp_path / "r.yaml"
    path.write_text("id: r0\ntitle: t\nx: [[1, 0], [0, 1]]\nheads:\n"
                    "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [1, 1]], w_v: [[1, 0], [0, 1]]}\n"
                    f"rope: {rope}\n", encoding="utf-8")
    r = cli("validate", str(path), env={"COLUMNS": "400"})
    assert r.code == 0, r.err
    said = "warning: rope: no pairing given, so it is interleaved: dimensions (2i, 2i+1) turn together"
    assert (said in r.out + r.err) == warned
    r = cli("--lang", "zh", "validate", str(path), env={"COLUMNS": "400"})
    assert ("没有给出配对方式，因此按 interleaved 处理" in r.out + r.err) == warned
    if warned:  # what it says is what explain takes
        assert "Pairing interleaved: dimensions (2i, 2i+1) turn together" in cli("explain", str(path)).out


# --- fix-rope F10: a rope base written as a float or with an exponent is asked in digits, with its range ---------


@pytest.mark.parametrize("base", ["1e308", "10000.0", "1e4"])
def test_a_rope_base_not_in_digits_gets_the_range(cli, tmp_path, base):
    path = tmp_path / "r.yaml"
    path.write_text("id: r0\ntitle: t\nx: [[1, 0], [0, 1]]\nheads:\n"
                    "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [1, 1]], w_v: [[1, 0], [0, 1]]}\n"
                    f"rope: {{base: {base}, pairing: half}}\n", encoding="utf-8")
    r = cli("validate", str(path), env={"COLUMNS": "400"})
    assert r.code == 2
    lines = [line for line in (r.out + r.err).splitlines() if "rope.base" in line]
    assert lines == [f"{path}:6:14: rope.base: expected a whole number from 2 up, found the number {base} (write "
                     "RoPE's base in digits, without a decimal point or an exponent (10000, not 1e4 or 10000.0), from 2 "
                     "to 1,000,000,000,000)"]
    r = cli("--lang", "zh", "validate", str(path), env={"COLUMNS": "400"})
    assert "不带小数点或指数（写 10000，不要写 1e4 或 10000.0），取值为 2 到 1,000,000,000,000" in r.out + r.err


# --- fix-rope F9: the --tiled refusal after a norm names no command the learner did not type ---------------------


@pytest.mark.parametrize("command", ["explain", "practice"])
def test_tiled_after_a_norm_is_refused_in_words_for_any_command(cli, command):
    r = cli(command, "prenorm-rmsnorm-3x2", "--tiled")
    assert r.code == 2
    assert r.err.strip() == ("error: exercise prenorm-rmsnorm-3x2: the online softmax is not walked after a norm (each "
                             "row's scores mix several square roots); use --tiled on an exercise without norm")
    r = cli("--lang", "zh", command, "prenorm-rmsnorm-3x2", "--tiled")
    assert "请对没有 norm 的练习使用 --tiled" in r.err and r.code == 2
