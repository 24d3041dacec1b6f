"""Handouts: `explain --format markdown|html`, `--export FILE.html|.svg|.md`, `--blank` worksheets.

The golden files were checked by hand: Q = K = V = [[1, 1], [2, 2], [2, 2]],
scores [[2, 4, 4], [4, 8, 8], [4, 8, 8]], scaled = scores/√2, the first
weight 1/(1 + 2e^√2) ≈ 1/9.226 ≈ 0.1084 and the first output entry
(e^-√2 + 4)/(e^-√2 + 2) ≈ 4.2431/2.2431 ≈ 1.8916.  Regenerate them only
after reading the diff: ``attn-tutor explain single-head-3x4 --format
markdown > tests/golden/single-head-3x4.md`` (and ``--blank`` for
``single-head-3x4.blank.md``).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import sympy

from tutor.authoring.generate import Spec, generate
from tutor.exercise import parse_exercise
from tutor.exercise.catalog import resolve
from tutor.render.html import export_html, export_svg
from tutor.render.json import dumps
from tutor.render.markdown import exact_sympy, render_markdown, tex_name
from tutor.steps import solve

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
BUNDLED_IDS = sorted(p.stem for p in (REPO / "exercises").glob("*.yaml"))


# --- Markdown ------------------------------------------------------------------------


def test_markdown_of_the_classic_example_is_the_golden_file(cli):
    golden = (GOLDEN / "single-head-3x4.md").read_text(encoding="utf-8")
    assert render_markdown(solve(resolve("single-head-3x4"))) == golden
    code, out, err = cli("explain", "single-head-3x4", "--format", "markdown")
    assert (code, out, err) == (0, golden, "")


def test_blank_markdown_of_the_classic_example_is_the_golden_worksheet(cli):
    golden = (GOLDEN / "single-head-3x4.blank.md").read_text(encoding="utf-8")
    code, out, _ = cli("explain", "single-head-3x4", "--format", "markdown", "--blank")
    assert (code, out) == (0, golden)


def test_the_worksheet_has_the_answer_keys_layout_with_the_answers_left_empty():
    key = render_markdown(solve(resolve("single-head-3x4"))).splitlines()
    sheet = render_markdown(solve(resolve("single-head-3x4")), blank=True).splitlines()
    headings = [line for line in key if line.startswith("#")]
    assert [line for line in sheet if line.startswith("#")] == headings
    assert "0.1084" in "\n".join(key) and "0.1084" not in "\n".join(sheet)
    # the inputs are shown on both
    inputs = r"X = \begin{bmatrix} 1 & 0 & 1 & 0 \\ 0 & 2 & 0 & 2 \\ 1 & 1 & 1 & 1 \end{bmatrix}"
    assert inputs in key and inputs in sheet
    assert r"Q = \begin{bmatrix} \qquad & \qquad \\ \qquad & \qquad \\ \qquad & \qquad \end{bmatrix}" in sheet


@pytest.mark.parametrize("exercise_id", BUNDLED_IDS)
def test_markdown_math_is_well_formed_for_katex(exercise_id):
    for blank in (False, True):
        text = render_markdown(solve(resolve(exercise_id)), blank=blank)
        assert text.count("$$") % 2 == 0
        blocks = re.findall(r"^\$\$\n(.*?)\n\$\$$", text, flags=re.S | re.M)
        assert len(blocks) == text.count("$$") // 2  # every block is $$ / one line / $$
        for block in blocks:
            assert block.count(r"\begin{bmatrix}") == block.count(r"\end{bmatrix}")
            assert block.count("{") == block.count("}")
            assert "\n" not in block
            assert "nan" not in block.lower()  # a fully masked row is zeros, never NaN
        for line in text.splitlines():
            if line.startswith("$") and not line.startswith("$$"):
                assert line.endswith("$") and line.count("$") % 2 == 0, line


@pytest.mark.parametrize("exercise_id", BUNDLED_IDS)
def test_handout_entries_equal_the_engines_exact_values(exercise_id):
    """The handout's form of each entry (divided by one exponential) is the same number as ``to_sympy()``."""
    sol = solve(resolve(exercise_id))
    seen = set()
    for step in sol.steps:
        for row in step.exact:
            for e in row:
                if str(e) in seen or str(e) == "-inf":
                    continue
                seen.add(str(e))
                a, b = exact_sympy(e), e.to_sympy()
                assert abs(sympy.N(a - b, 40)) < sympy.Float("1e-30", 40), (step.id, str(e))
                assert abs(float(sympy.N(a, 20)) - e.value()) <= 1e-12 * max(1.0, abs(e.value()))


def test_the_first_weight_prints_like_the_terminal():
    sol = solve(resolve("single-head-3x4"))
    e = sol.step("weights", 0).exact[0][0]
    assert str(e) == "1/(1 + 2*exp(sqrt(2)))"
    assert sympy.latex(exact_sympy(e)) == r"\frac{1}{1 + 2 e^{\sqrt{2}}}"


@pytest.mark.parametrize("name, tex", [
    ("X", "X"), ("X_kv", r"X_{\text{kv}}"), ("W_Q", "W_{Q}"), ("Kᵀ", r"K^\top"), ("head_0", r"\text{head}_{0}"),
    ("√2", r"\sqrt{2}"), ("scores", r"\text{scores}"), ("b_O", "b_{O}"),
])
def test_operand_names_in_latex(name, tex):
    assert tex_name(name) == tex


def test_masked_entries_are_minus_infinity_and_layer_steps_appear():
    text = render_markdown(solve(resolve("two-head-causal-3x4")))
    assert r"-\infty" in text
    assert "## Whole layer" in text and "### 17. Concatenate the heads" in text and "### 18. Output projection" in text
    assert "## Head 1" in text


def test_head_option_limits_the_heads_shown(cli):
    code, out, _ = cli("explain", "two-head-causal-3x4", "--format", "markdown", "--head", "1")
    assert code == 0 and "## Head 1" in out and "## Head 0" not in out


def test_a_handout_at_the_size_limits_takes_seconds_not_minutes():
    ex = parse_exercise(generate(Spec(tokens=16, d_model=32, heads=8, d_k=4, mask="causal", seed=3)), "big.yaml")
    sol = solve(ex)
    start = time.perf_counter()
    text = render_markdown(sol)
    assert time.perf_counter() - start < 20
    assert "Too large to print exactly here" in text  # 16x16 softmax matrices are shown in decimals


# --- HTML, SVG, export ----------------------------------------------------------------


def test_html_page_is_standalone_and_titled(cli):
    code, out, _ = cli("explain", "single-head-3x4", "--format", "html")
    assert code == 0
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "<title>Three tokens, d_model = 4, one head with d_k = 2</title>" in out
    assert "Queries Q" in out and "0.1084" in out


def test_html_escapes_the_title():
    ex = parse_exercise(generate(Spec(seed=1, title="a <b> & {c}")), "t.yaml")
    page = export_html(solve(ex))
    assert "<title>a &lt;b&gt; &amp; {c}</title>" in page


def test_svg_export(tmp_path, cli):
    target = tmp_path / "classic.svg"
    code, out, err = cli("explain", "single-head-3x4", "--export", str(target))
    assert (code, out, err) == (0, "", f"wrote {target}\n")
    svg = target.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "Queries" in svg
    assert export_svg(solve(resolve("single-head-3x4"))) == svg


def test_svg_and_html_exports_ask_the_network_for_nothing(tmp_path, cli):
    """rich's SVG template fetches Fira Code from cdnjs; a handout opens offline, so the export uses local fonts."""
    for name in ("a.svg", "a.html"):
        cli("explain", "single-head-3x4", "--export", str(tmp_path / name))
        page = (tmp_path / name).read_text(encoding="utf-8")
        assert "cdnjs" not in page and "@font-face" not in page and "woff" not in page
        assert re.findall(r"url\((?!#)", page) == []  # only references inside the file (clip paths)
        assert "monospace" in page
    svg = (tmp_path / "a.svg").read_text(encoding="utf-8")
    assert "font-family: 'Fira Code', Menlo, 'DejaVu Sans Mono', Consolas, monospace;" in svg


def test_export_html_and_markdown_files(tmp_path, cli):
    html_file, md_file = tmp_path / "a.html", tmp_path / "a.md"
    assert cli("explain", "single-head-3x4", "--export", str(html_file))[0] == 0
    assert cli("explain", "single-head-3x4", "--export", str(md_file))[0] == 0
    assert html_file.read_text(encoding="utf-8") == export_html(solve(resolve("single-head-3x4")))
    assert md_file.read_text(encoding="utf-8") == (GOLDEN / "single-head-3x4.md").read_text(encoding="utf-8")


def test_blank_html_worksheet_has_no_answers_and_no_heatmap():
    sol = solve(resolve("single-head-3x4"))
    key, sheet = export_html(sol), export_html(sol, blank=True)
    assert "0.1084" in key and "0.1084" not in sheet
    assert "Attention weights, head 1" in key and "Attention weights, head 1" not in sheet
    assert "Queries Q" in sheet and "X·W_Q" in sheet  # same layout: steps and formulas


def test_blank_rich_worksheet_in_the_terminal(cli):
    code, out, _ = cli("explain", "single-head-3x4", "--blank")
    assert code == 0
    assert "1. Queries Q" in out and "7. Head output" in out
    for answer in ("0.1084", "1.4142", "2√2", "1.8916"):
        assert answer not in out
    # the inputs are still shown
    assert "│ t2 │  0 │  2 │  0 │  2 │" in out


@pytest.mark.parametrize("args, message", [
    (["--export", "out.txt"], "cannot export to 'out.txt': the file name must end in one of .html, .htm, .svg, .md"),
    (["--blank", "--format", "json"], "--blank makes a worksheet for reading"),
])
def test_handout_option_errors_exit_2(args, message, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("explain", "single-head-3x4", *args)
    assert code == 2
    assert message in " ".join(err.replace("│", " ").split())
    if "json" in args:  # --format json: stdout has the error document (issue 8, G.24)
        assert json.loads(out)["error"] == "usage" and message in json.loads(out)["errors"][0]["message"]
    else:
        assert out == ""


def test_json_output_is_unchanged_by_the_new_options(cli):
    code, out, _ = cli("explain", "two-head-fused-3x4", "--format", "json")
    assert code == 0 and out == dumps(solve(resolve("two-head-fused-3x4"))) + "\n"
