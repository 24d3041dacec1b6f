"""explain --tiled: FlashAttention's online softmax by hand, checked against the issue's worked numbers,
PyTorch's case, the plain softmax, and a float walk written here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import sympy

from tutor.catalog import resolve
from tutor.steps import solve
from tutor.tiled import TiledVariant, online_floats, tiled

BUNDLED = ["single-head-3x4", "two-head-causal-3x4", "cross-attention-2x3", "fully-masked-row-3x3", "padding-4x2",
           "two-head-fused-3x4", "two-head-dk1-3x4", "single-head-dk4-2x4"]
CASES = json.loads((Path(__file__).parent / "data" / "v2" / "v2-cases.json").read_text())["cases"]


def _same(e, expr) -> bool:
    return sympy.simplify(e.to_sympy() - expr) == 0


def test_the_issue_worked_example_exactly_and_decimally():
    # single-head-3x4, query t1, --block-size 1: scores √2, 2√2, 2√2; V rows [1,1], [2,2], [2,2]
    r = tiled(resolve("single-head-3x4"), 1)[0]
    b1, b2, b3 = r.blocks
    s2, E = sympy.sqrt(2), sympy.exp(-sympy.sqrt(2))
    assert b1.alpha is None and _same(b1.m, s2) and _same(b1.l, 1) and all(_same(a, 1) for a in b1.acc)
    assert _same(b2.alpha, E) and _same(b2.m, 2 * s2) and _same(b2.l, 1 + E) and all(_same(a, 2 + E) for a in b2.acc)
    assert _same(b3.alpha, 1) and _same(b3.m, 2 * s2) and _same(b3.l, 2 + E) and all(_same(a, 4 + E) for a in b3.acc)
    assert str(b2.alpha) == "exp(-sqrt(2))" and str(b2.l) == "1 + exp(-sqrt(2))"
    assert all(_same(x, (4 + E) / (2 + E)) for x in r.o)
    assert r.lse_text == "2*sqrt(2) + log(2 + exp(-sqrt(2)))"
    # the issue's decimals, to the 6 places it gives
    assert round(b2.alpha.value(), 6) == 0.243117 and round(b2.l.value(), 6) == 1.243117
    assert [round(a.value(), 6) for a in b2.acc] == [2.243117, 2.243117]
    assert round(b3.l.value(), 6) == 2.243117 and [round(a.value(), 6) for a in b3.acc] == [4.243117, 4.243117]
    assert [round(x.value(), 6) for x in r.o] == [1.891617, 1.891617]
    assert round(r.lse, 6) == 3.636293
    assert r.equal


def test_pytorch_case_block_size_2():
    case = next(c for c in CASES if c["name"].startswith("classic online softmax"))
    r = tiled(resolve(case["exercise"]), 2)[0]
    want = case["expected"]
    assert [list(b.keys) for b in r.blocks] == [b["keys"] for b in want["blocks"]]
    for b, w in zip(r.blocks, want["blocks"]):
        assert math.isclose(b.m.value(), w["m"], rel_tol=1e-12) and math.isclose(b.l.value(), w["l"], rel_tol=1e-12)
        np.testing.assert_allclose([a.value() for a in b.acc], w["acc"], rtol=1e-12)
        if "alpha" in w:
            assert math.isclose(b.alpha.value(), w["alpha"], rel_tol=1e-12)
        else:
            assert b.alpha is None
    np.testing.assert_allclose([x.value() for x in r.o], want["o"], rtol=1e-12)
    assert math.isclose(r.lse, want["lse"], rel_tol=1e-12)


@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize("block", [1, 2, 3, 16])
def test_o_is_the_plain_softmax_and_lse_its_log_sum_exp(name, block):
    ex = resolve(name)
    sol = solve(ex)
    for r in tiled(ex, block):
        assert r.equal
        plain = sol.step("head_output", r.head)
        np.testing.assert_allclose([x.value() for x in r.o], plain.value[r.row], rtol=1e-12, atol=1e-15)
        scores = sol.step("masked" if ex.has_mask else "scaled", r.head).value[r.row]
        live = [s for s in scores if s != -math.inf]
        lse = math.log(math.fsum(math.exp(s) for s in live)) if live else -math.inf
        assert r.lse == lse or math.isclose(r.lse, lse, rel_tol=1e-12)
        # the float walk written independently of the exact one agrees on every quantity
        V = sol.step("v", r.head).value
        f = online_floats(scores, V, block)
        for b, fb in zip(r.blocks, f["blocks"]):
            assert b.m.value() == fb["m"] or math.isclose(b.m.value(), fb["m"], rel_tol=1e-12)
            assert math.isclose(b.l.value(), fb["l"], rel_tol=1e-12, abs_tol=1e-300)
            np.testing.assert_allclose([a.value() for a in b.acc], fb["acc"], rtol=1e-12, atol=1e-300)


def test_uneven_last_block():
    r = tiled(resolve("padding-4x2"), 3)[0]
    assert [b.keys for b in r.blocks] == [(0, 1, 2), (3,)]


def test_the_misconception_variants_give_other_numbers():
    r = tiled(resolve("single-head-3x4"), 1)[0]
    scores, V = [math.sqrt(2), 2 * math.sqrt(2), 2 * math.sqrt(2)], [[1, 1], [2, 2], [2, 2]]
    right = online_floats(scores, V, 1)["o"]
    np.testing.assert_allclose(right, [x.value() for x in r.o], rtol=1e-12)
    for v in (TiledVariant(rescale_acc=False), TiledVariant(rescale_l=False), TiledVariant(alpha_inverted=True),
              TiledVariant(divide_per_block=True)):
        assert abs(online_floats(scores, V, 1, v)["o"][0] - right[0]) > 1e-3, v


def test_explain_tiled_text_and_json(cli):
    code, out, err = cli("explain", "single-head-3x4", "--tiled", "--block-size", "1")
    assert code == 0, err
    assert "alpha = exp(m_old − m) = exp(−√2) ≈ 0.2431" in out
    assert "lse = m + log(l) = 2√2 + log(2 + exp(−√2)) ≈ 3.6363" in out
    code, out, err = cli("explain", "single-head-3x4", "--tiled", "--block-size", "1", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    first = doc["tiled"][0]
    assert first["head"] == 0 and first["row"] == 0 and "alpha" not in first["blocks"][0]
    assert first["blocks"][1]["alpha"] == {"exact": "exp(-sqrt(2))", "value": pytest.approx(0.2431167344342142)}
    assert first["blocks"][2]["l"]["exact"] == "2 + exp(-sqrt(2))"
    assert first["lse"]["value"] == pytest.approx(3.6362934228150965)


def test_explain_tiled_refuses_a_block_size_of_zero(cli):
    code, out, err = cli("explain", "single-head-3x4", "--tiled", "--block-size", "0")
    assert code == 2 and "block-size" in err


# --- check names the online softmax's mistakes, on worked rows written here by hand --------------------------


def _walk(scores, V, B, *, rescale_acc=True, rescale_l=True, inverted=False, per_block=False):
    """The online softmax written out in the test, with a learner's mistakes as switches."""
    m, lsum, acc, blocks = -math.inf, 0.0, [0.0] * len(V[0]), []
    for start in range(0, len(scores), B):
        keys = range(start, min(start + B, len(scores)))
        new = max([m] + [scores[j] for j in keys])
        alpha = math.exp(new - m if inverted else m - new) if m != -math.inf else 0.0
        p = {j: math.exp(scores[j] - new) for j in keys}
        lsum = (alpha if rescale_l else 1) * lsum + sum(p.values())
        acc = [(alpha if rescale_acc else 1) * a + sum(p[j] * V[j][c] for j in keys) for c, a in enumerate(acc)]
        if per_block:
            acc = [a / lsum for a in acc]
        block = {"m": new, "l": lsum, "acc": acc}
        if start:
            block["alpha"] = alpha
        blocks.append(block)
        m = new
    return blocks, (acc if per_block else [a / lsum for a in acc])


def _file(blocks, o) -> str:
    lines = ["exercise: single-head-3x4", "tiled:", "  block_size: 1", "  query: t1", "  blocks:"]
    for b in blocks:
        parts = [f"{k}: {v:.6f}" for k, v in b.items() if k != "acc"] + ["acc: [" + ", ".join(f"{a:.6f}" for a in b["acc"]) + "]"]
        lines.append("    - {" + ", ".join(parts) + "}")
    lines.append("  o: [" + ", ".join(f"{x:.6f}" for x in o) + "]")
    return "\n".join(lines) + "\n"


CLASSIC = ([math.sqrt(2), 2 * math.sqrt(2), 2 * math.sqrt(2)], [[1, 1], [2, 2], [2, 2]])


@pytest.mark.parametrize("switch, key", [
    ({"rescale_acc": False}, "tiled_no_rescale_acc"),
    ({"rescale_l": False}, "tiled_no_rescale_l"),
    ({"inverted": True}, "tiled_alpha_inverted"),
    ({"per_block": True}, "tiled_divide_per_block"),
])
def test_check_names_the_online_softmax_mistake(cli, tmp_path, switch, key):
    blocks, o = _walk(*CLASSIC, 1, **switch)
    path = tmp_path / "tiled.yaml"
    path.write_text(_file(blocks, o))
    code, out, err = cli("check", str(path), "--format", "json")
    assert code == 1, out + err
    doc = json.loads(out)["tiled"]
    assert [d["key"] for d in doc["diagnoses"]] == [key]
    code, out, err = cli("check", str(path))
    assert code == 1 and "Diagnosis:" in out


def test_check_passes_the_right_online_softmax(cli, tmp_path):
    blocks, o = _walk(*CLASSIC, 1)
    path = tmp_path / "tiled.yaml"
    path.write_text(_file(blocks, o) + "  lse: 3.636293\n")
    code, out, err = cli("check", str(path))
    assert code == 0, out + err


def test_a_malformed_tiled_part_is_one_line_and_exit_2(cli, tmp_path):
    path = tmp_path / "tiled.yaml"
    path.write_text("exercise: single-head-3x4\ntiled:\n  block_size: 0\n  blocks: [{m: 1}]\n")
    code, out, err = cli("check", str(path))
    assert code == 2 and "block_size" in err and "Traceback" not in err


GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("argv, name", [
    (("explain", "single-head-3x4", "--tiled", "--block-size", "1"), "explain-tiled-single-head-3x4.txt"),
    (("explain", "single-head-3x4", "--backward"), "explain-backward-single-head-3x4.txt"),
])
def test_what_a_learner_reads_golden(cli, argv, name):
    """The online softmax and the backward pass of the classic, to the character (width 100, no colour)."""
    import os

    code, out, err = cli(*argv)
    assert code == 0 and err == ""
    golden = GOLDEN / name
    if os.environ.get("ATTN_TUTOR_UPDATE_GOLDEN") == "1":  # pragma: no cover - regenerating by hand
        golden.write_text(out)
    assert out == golden.read_text()


def test_tiled_goes_without_the_handout_formats(cli):
    for extra in (("--format", "markdown"), ("--backward",), ("--blank",)):
        code, out, err = cli("explain", "single-head-3x4", "--tiled", *extra)
        assert code == 2 and "--tiled" in err, extra


def test_gradient_names_in_latex_nest():
    from tutor.render.markdown import tex_name

    assert tex_name("d_W_K") == "d_{W_{K}}" and tex_name("d_head_1") == r"d_{\text{head}_{1}}"
    assert tex_name("W_Q") == "W_{Q}" and tex_name("head_1") == r"\text{head}_{1}"
