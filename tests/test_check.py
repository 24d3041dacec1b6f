"""`attn-tutor check`: the errata auditor, through the CLI (exact lines, exit
codes) and the library.  Right values are hand calculations written here
(the classic example: scores [2, 4, 4] / √2, softmax with math.exp)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tutor.audit.check import CARRIED, INDEPENDENT, ROUNDING, audit
from tutor.audit.solution import read_solution
from tutor.base.errors import ExerciseError
from tutor.exercise import validate_text

from .conftest import COLOUR, COLOUR_TERMINAL

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "check"


@pytest.fixture
def variables(variables):
    """The report's lines whole: these tests compare content; wrapping at the width is tested in test_terminal.py."""
    return {**variables, "COLUMNS": "400"}


def audit_text(text: str, base: Path = DATA):
    return audit(read_solution(text, "sol.yaml", base=base))


# --- the sample files ---------------------------------------------------------------------


def test_blog_post_numbers(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, err = cli("check", "blog-single-head-3x4.yaml")
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "Checking blog-single-head-3x4.yaml against exercise single-head-3x4: Three tokens, d_model = 4, one head with d_k = 2",
        "Source: the seed blog post's worked example",
        "",
        "Steps (each entry judged within the rounding it is written to)",
        "  ✗ wrong    weights      3 of 3 entries off",
        "  ✗ wrong    head_output  2 of 6 entries off; carries the error in weights forward",
        "               [t2, d1] = 2.0, [t2, d2] = 2.0, [t3, d1] = 2.0, [t3, d2] = 2.0: written to fewer than 2 decimals;"
        " right within that rounding, which says little.",
        "",
        "First wrong step: weights",
        "  [t1, t1]: you wrote 0.016, the right value is 0.1084",
        "  [t1, t2]: you wrote 0.492, the right value is 0.4458",
        "  [t1, t3]: you wrote 0.492, the right value is 0.4458",
        "  No known misconception explains it.",
        "  What follows from it:",
        "    ✗ head_output: carries the error forward (recomputed from your weights, it matches what you wrote)",
        "",
        "Plausibility (no recomputation needed)",
        "  ✓ every given matrix has the size of its step",
        "  ✓ every row of weights sums to 1 within rounding",
        "  ✓ every entry of weights lies between 0 and 1",
        "  ✓ every column of head_output lies within that column of V",
        "",
        "✗ wrong: 2 of 2 given steps are wrong; every plausibility check passes. The first wrong step is weights.",
    ]


def test_blog_first_row_by_hand():
    # scores row t1 = [2, 4, 4]; scaled by 1/√2; softmax: e^(√2) vs e^(2√2)
    a, b = math.exp(2 / math.sqrt(2)), math.exp(4 / math.sqrt(2))
    right = [a / (a + 2 * b), b / (a + 2 * b)]
    assert [round(x, 4) for x in right] == [0.1084, 0.4458]
    # forgetting the scaling gives e^2 / (e^2 + 2 e^4) = 0.0634, not the blog's 0.016
    assert round(math.exp(2) / (math.exp(2) + 2 * math.exp(4)), 4) == 0.0634
    report = audit(read_solution((DATA / "blog-single-head-3x4.yaml").read_text(), "blog.yaml", base=DATA))
    weights, out = report.steps
    assert weights.wrong == ((0, 0), (0, 1), (0, 2)) and weights.diagnoses == ()
    # 1.984 = 0.016·1 + 0.984·2 follows from the blog's own weights; the right value is 1.8916
    assert out.wrong == ((0, 0), (0, 1))
    assert round(right[0] * 1 + 2 * right[1] * 2, 4) == 1.8916
    assert (out.follows, out.source) == (CARRIED, ("weights", 0))
    assert report.exit_code == 1


def test_classic_correct_solution(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, err = cli("check", "classic-correct.yaml")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "  ✓ correct  scaled       9 entries right" in lines
    assert "  ✓ correct  head_output  6 entries right" in lines
    assert "  ✓ every column of head_output lies within that column of your V" in lines
    assert lines[-1] == "✓ correct: every given step is right and plausible (7 of the 7 steps of the exercise given)."
    assert "✗" not in out


def test_homework_that_forgot_the_scaling(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, _ = cli("check", "homework-no-scaling.yaml")
    assert code == 1
    lines = out.splitlines()
    i = lines.index("First wrong step: scaled")
    # a wrong entry's exact form beside its decimal: scaled = scores / √2, so 2 / √2 = √2 and 4 / √2 = 2√2
    assert lines[i + 1:i + 3] == ["  [t1, t1]: you wrote 2, the right value is √2 (about 1.4142)",
                                  "  [t1, t2]: you wrote 4, the right value is 2√2 (about 2.8284)"]
    assert "  … and 3 more" in lines
    assert "  Diagnosis: You forgot to divide by √d_k: scaled = scores / √2." in lines
    assert "    ✗ weights: carries the error forward (recomputed from your scaled, it matches what you wrote)" in lines
    assert "  ✗ wrong    weights      9 of 9 entries off; carries the error in scaled forward" in lines
    assert "  ✓ correct  scores       9 entries right" in lines


def test_homework_weights_alone_are_diagnosed_as_no_scaling():
    # the same homework's weights without the steps before them: diagnosed from the weights alone
    report = audit_text("exercise: single-head-3x4\nweights: [[0.06, 0.47, 0.47], [0.01, 0.50, 0.50], [0.01, 0.50, 0.50]]\n")
    (w,) = report.steps
    assert [d.key for d in w.diagnoses] == ["no_scaling"]
    assert w.follows is None


def test_malformed_file_is_unusable(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, err = cli("check", "malformed.yaml")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        'error: malformed.yaml:3:25: scores[1][1]: unknown name "eight" at column 1 in "eight" (known: sqrt, exp, cos, sin, e, inf)',
        "error: malformed.yaml:4:1: weigths: 'weigths' is not a step name (did you mean 'weights'?)",
        "error: malformed.yaml:5:1: concat: the exercise has one head, so it has no 'concat' step",
    ]


def test_two_heads_mask_set_to_zero(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, _ = cli("check", "two-head-causal-mask-zero.yaml")
    assert code == 1
    lines = out.splitlines()
    assert "  ✓ correct  masked (head 1)       9 entries right" in lines
    assert "  ✗ wrong    masked (head 2)       3 of 9 entries off" in lines
    assert "First wrong step: masked (head 2)" in lines
    assert "  [t1, t2]: you wrote 0, the right value is −∞" in lines
    assert ("  Diagnosis: You set the masked scores to 0; set them to -inf, so that they get zero weight "
            "after the softmax.") in lines
    assert "    • not given, but they inherit the error: concat" in lines
    assert ("  ✗ weights (head 2) gives weight where the mask blocks (it must be 0 there): "
            "[t1, t2] = 0.3333, [t1, t3] = 0.3333, [t2, t3] = 0.0035") in lines
    assert "  ✗ wrong    output                3 of 12 entries off; carries the error in head_output (head 2) forward" in lines


def test_json_format(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, _ = cli("check", "blog-single-head-3x4.yaml", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert (doc["verdict"], doc["exit_code"], doc["exercise"]) == ("wrong", 1, "single-head-3x4")
    assert doc["first_wrong"] == {"id": "weights", "head": 0}
    w, o = doc["steps"]
    assert w["written"][0] == ["0.016", "0.492", "0.492"] and w["written"][1] == [None, None, None]
    assert [round(x, 4) for x in w["expected"][0]] == [0.1084, 0.4458, 0.4458]
    assert w["wrong_cells"] == [[0, 0], [0, 1], [0, 2]]
    assert (w["line"], w["column"]) == (5, 10)
    assert (o["follows"], o["source"]) == ("carried", {"id": "weights", "head": 0})
    assert {f["check"] for f in doc["plausibility"]} == {"shape", "row_sums", "weights_range", "column_range"}
    assert out.isascii()


def test_json_title_and_source(cli, monkeypatch, tmp_path):
    # title: the exercise's (as the rich heading prints it); source: the solution file's `source:`, else null
    monkeypatch.chdir(DATA)
    code, out, _ = cli("check", "blog-single-head-3x4.yaml", "--format", "json")
    doc = json.loads(out)
    assert (doc["title"], doc["source"], doc["solution_title"]) == (
        "Three tokens, d_model = 4, one head with d_k = 2", "the seed blog post's worked example", None)
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: two-head-causal-3x4\ntitle: homework 3\nheads: [{q: [[2, 0], [0, 4], [2, 2]]}]\n")
    code, out, _ = cli("check", str(sol), "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert (doc["title"], doc["source"], doc["solution_title"]) == (
        "Two heads of d_k = 2, causal mask, output projection", None, "homework 3")
    assert doc["warnings"] == []


def test_json_masked_and_correct(cli, monkeypatch):
    monkeypatch.chdir(DATA)
    code, out, _ = cli("check", "two-head-causal-mask-zero.yaml", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    masked0 = doc["steps"][0]
    assert masked0["verdict"] == "correct" and masked0["expected"][0][1] == "-inf"
    assert doc["steps"][2]["diagnoses"][0]["key"] == "mask_zero"
    assert doc["steps"][2]["diagnoses"][0]["cells"] == [[0, 1], [0, 2], [1, 2]]


# --- exercise lookup -----------------------------------------------------------------------


def test_exercise_path_is_relative_to_the_solution_file(cli, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # homework-no-scaling names ../../../exercises/single-head-3x4.yaml
    code, out, _ = cli("check", str(DATA / "homework-no-scaling.yaml"))
    assert code == 1 and "First wrong step: scaled" in out


def test_exercise_option_overrides(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: two-head-causal-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n")
    code, out, err = cli("check", str(sol), "--exercise", "single-head-3x4")
    assert (code, err) == (0, "")
    assert "against exercise single-head-3x4" in out


def test_missing_or_unknown_exercise(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("q: [[1, 1], [2, 2], [2, 2]]\n")
    code, _, err = cli("check", str(sol))
    assert code == 2
    assert err == (f"error: {sol}:1:1: no 'exercise' field: the file must name its exercise (add e.g. "
                   "`exercise: single-head-3x4` (a bundled id or a path relative to this file), or pass --exercise)\n")
    sol.write_text("exercise: no-such-thing\n")
    code, _, err = cli("check", str(sol))
    assert code == 2
    assert err == (f"error: {sol}:1:11: exercise: no exercise has the id 'no-such-thing' (bundled, or in a pack "
                   "given with --exercises or ATTN_TUTOR_PATH) (run `attn-tutor list` to see the ids; name a file by "
                   "its path, ending in .yaml)\n")
    sol.write_text("exercise: nowhere/e.yaml\n")
    code, _, err = cli("check", str(sol))
    assert code == 2 and f"{sol}:1:11: exercise: no exercise file 'nowhere/e.yaml'" in err


def test_unreadable_and_not_yaml(cli, tmp_path):
    code, _, err = cli("check", str(tmp_path / "none.yaml"))
    assert code == 2 and err.startswith("error: ") and "cannot read the file" in err
    bad = tmp_path / "b.yaml"
    bad.write_text("exercise: [unclosed\n")
    code, _, err = cli("check", str(bad))
    assert code == 2 and "not valid YAML" in err and "Traceback" not in err
    bad.write_text("- 1\n- 2\n")
    code, _, err = cli("check", str(bad))
    assert code == 2 and "not a solution file: its top level is a list, not a mapping of fields" in err


@pytest.mark.parametrize(("value", "line"), [
    ("[]", "scaled: expected a matrix (a list of rows), found an empty list"),
    ("[[2, 4, 4], [], [4, 8, 8]]", "scaled[1]: expected a row (a list of numbers), found an empty list"),
])
def test_an_empty_matrix_or_row_is_called_empty(cli, tmp_path, value, line):
    """Found by tests/test_fuzz.py: "expected a row (a list of numbers), found a list" read as a contradiction."""
    sol = tmp_path / "s.yaml"
    sol.write_text(f"exercise: single-head-3x4\nscaled: {value}\n")
    code, _, err = cli("check", str(sol))
    assert code == 2 and err.splitlines() == [f"error: {sol}:2:{9 if value == '[]' else 21}: {line}"]


# --- the form of the file --------------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("exercise: two-head-causal-3x4\nweights: [[1, 0, 0], [1, 0, 0], [1, 0, 0]]\n",
     ("sol.yaml:2:1: weights: the exercise has 2 heads, so 'weights' must go under heads:, one mapping per head "
      "(write heads: [{weights: …}, …] with head 1 first)")),
    ("exercise: two-head-causal-3x4\nheads:\n  - concat: [[1]]\n",
     "sol.yaml:3:5: heads[0].concat: 'concat' is a step of the whole layer; give it at the top level, not under heads:"),
    ("exercise: two-head-causal-3x4\nheads: [{}, {}, {}]\n",
     "sol.yaml:2:8: heads: heads lists 3 heads, but the exercise has 2"),
    ("exercise: single-head-3x4\nmasked: [[1]]\n",
     "sol.yaml:2:1: masked: the exercise has no mask or key padding, so it has no 'masked' step"),
    ("exercise: single-head-3x4\noutput: [[1]]\n",
     "sol.yaml:2:1: output: the exercise has no w_o, so it has no 'output' step (the result is the concatenation)"),
    ("exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8]]\n",
     "sol.yaml:2:21: scores[1]: row 2 has 2 entries but row 1 has 3"),
    ("exercise: single-head-3x4\nscores: 4\n",
     "sol.yaml:2:9: scores: expected a matrix (a list of rows), found the number 4"),
    ("exercise: single-head-3x4\nscores: [[2, true, 4]]\n",
     "sol.yaml:2:14: scores[0][1]: true is not a number (true/false are not allowed in a matrix)"),
    ("exercise: single-head-3x4\nscores: [[~, ~]]\n",
     "sol.yaml:2:9: scores: every entry is ~ (not given); leave the step out instead"),
    ("exercise: single-head-3x4\nq: [[\"__import__('os').system('echo hi')\"]]\n",
     'sol.yaml:2:6: q[0][0]: unexpected character "\'" at column 12 in "__import__(\'os\').system(\'echo hi\')"'),
    ("exercise: single-head-3x4\nsoftmax: [[1]]\n",
     ("sol.yaml:2:1: softmax: 'softmax' is not a step name (the steps of this exercise are q, k, v, scores, scaled, weights, head_output, and those of its backward pass, d_output … d_x; besides them a solution file may have exercise, title, source, heads, student, tiled)")),
    ("exercise: two-head-causal-3x4\nheads:\n  - softmax: [[1]]\n",
     ("sol.yaml:3:5: heads[0].softmax: 'softmax' is not a step name (the steps of this exercise are q, k, v, scores, scaled, masked, weights, head_output, concat, output, and those of its backward pass, d_output … d_x)")),
])
def test_unusable_files(text, message):
    with pytest.raises(ExerciseError) as err:
        read_solution(text, "sol.yaml", base=DATA)
    assert str(err.value).splitlines()[0] == message


@pytest.mark.parametrize("entry", ["yes", "no", "on", "off", "Yes", "1:20", "0x10"])
def test_yaml11_traps_are_worded_as_the_exercise_loader_words_them(entry):
    # YAML 1.2 reads `yes` as the text "yes" (YAML 1.1 tools: true), `1:20` as text (YAML 1.1: 80);
    # the solution reader says so exactly as the exercise loader does for the same entry
    with pytest.raises(ExerciseError) as err:
        read_solution(f"exercise: single-head-3x4\nscores: [[2, {entry}, 4]]\n", "sol.yaml")
    (problem,) = err.value.problems
    loader = validate_text(f"id: e\ntitle: e\nx: [[2, {entry}, 4]]\nheads: [{{w_q: [[1]], w_k: [[1]], w_v: [[1]]}}]\n")
    (expected,) = [p for p in loader.problems if p.field == "x[0][1]"]
    assert (problem.line, problem.column, problem.field) == (2, 14, "scores[0][1]")
    assert (problem.message, problem.hint) == (expected.message, expected.hint)
    assert "YAML 1.1" in problem.hint or "hexadecimal" in problem.hint


def test_yes_gets_the_yaml11_hint(tmp_path, cli):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nscores: [[2, yes, 4], [4, 8, 8], [4, 8, 8]]\n")
    code, out, err = cli("check", str(sol))
    assert (code, out) == (2, "")
    assert err == (f"error: {sol}:2:14: scores[0][1]: expected a number (integer, decimal, or a fraction such as "
                   "\"1/3\"), found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; "
                   "write a number)\n")


def test_leading_zero_warns_as_the_exercise_loader_does(tmp_path, cli):
    # 010 is ten in YAML 1.2 (eight for YAML 1.1 tools): scores[t2, t2] is 2·2 + 2·2 = 8, so 010 is wrong
    text = "exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 010, 8], [4, 8, 8]]\n"
    sf = read_solution(text, "sol.yaml")
    assert sf.steps[0].entries[1][1].value() == 10
    (warning,) = sf.warnings
    loader = validate_text("id: e\ntitle: e\nx: [[010]]\nheads: [{w_q: [[1]], w_k: [[1]], w_v: [[1]]}]\n")
    (expected,) = loader.warnings
    assert (warning.line, warning.column, warning.field) == (2, 25, "scores[1][1]")
    assert (warning.message, warning.hint) == (expected.message, expected.hint)
    sol = tmp_path / "s.yaml"
    sol.write_text(text)
    code, out, err = cli("check", str(sol))
    assert code == 1 and "First wrong step: scores" in out
    assert err == (f"{sol}:2:25: warning: scores[1][1]: 010 has a leading zero: read as 10 (YAML 1.2), but YAML 1.1 "
                   "tools such as PyYAML read it as octal (write 10)\n")
    code, out, err = cli("check", str(sol), "--format", "json")
    assert (code, err) == (1, "")
    (w,) = json.loads(out)["warnings"]
    assert (w["line"], w["column"], w["field"], w["hint"]) == (2, 25, "scores[1][1]", "write 10")


def test_nothing_typed_runs_as_code(tmp_path, cli):
    marker = tmp_path / "ran"
    sol = tmp_path / "s.yaml"
    sol.write_text(f'exercise: single-head-3x4\nq: [["open(\'{marker}\', \'w\')", 1], [2, 2], [2, 2]]\n')
    code, _, err = cli("check", str(sol))
    assert code == 2 and "error:" in err
    assert not marker.exists()


# --- rounding as written ---------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "ok"), [
    ("1.41", True), ("1.414", True), ("1.4142", True), ("1.41421", True), ("1.42", False), ("1.4", True),
    ("1.41422", False), ("'sqrt(2)'", True), ("'2/sqrt(2)'", True), ("'1.41'", True), ("'1/sqrt(3)'", False),
    ("1", False), ("'1.414/1'", True),
])
def test_a_decimal_claims_its_rounding_interval(entry, ok):
    # scaled[t1, t1] = 2/√2 = √2 = 1.41421356…
    text = f"exercise: single-head-3x4\nscaled: [[{entry}, ~, ~], [~, ~, ~], [~, ~, ~]]\n"
    report = audit_text(text)
    assert report.steps[0].ok is ok


def test_trailing_zeros_count():
    # 0.45 claims [0.445, 0.455] and takes 0.4458; 0.4500 claims [0.44995, 0.45005] and does not
    row = "[~, ~, ~], [~, ~, ~]"
    assert audit_text(f"exercise: single-head-3x4\nweights: [[~, 0.45, ~], {row}]\n").ok
    assert not audit_text(f"exercise: single-head-3x4\nweights: [[~, 0.4500, ~], {row}]\n").ok


def test_rounded_too_early_is_recognised():
    # scaled written to one place (right as written), weights computed from those to 4 places:
    # softmax([1.4, 2.8, 2.8]) = 0.1098, not 0.1084
    w = [math.exp(1.4) / (math.exp(1.4) + 2 * math.exp(2.8)), math.exp(2.8) / (math.exp(1.4) + 2 * math.exp(2.8))]
    assert round(w[0], 4) == 0.1098
    text = (f"exercise: single-head-3x4\nscaled: [[1.4, 2.8, 2.8], [~, ~, ~], [~, ~, ~]]\n"
            f"weights: [[{w[0]:.4f}, {w[1]:.4f}, {w[1]:.4f}], [~, ~, ~], [~, ~, ~]]\n")
    report = audit_text(text)
    scaled, weights = report.steps
    assert scaled.ok and not weights.ok
    assert weights.follows == ROUNDING


def test_later_step_wrong_on_its_own():
    # weights are the no-scaling ones; head_output rows are neither right nor what those weights give
    text = ("exercise: single-head-3x4\n"
            "weights: [[0.06, 0.47, 0.47], [0.01, 0.50, 0.50], [0.01, 0.50, 0.50]]\n"
            "head_output: [[1.5, 1.5], [1.99, 1.99], [1.99, 1.99]]\n")
    report = audit_text(text)
    _, out = report.steps
    assert (out.follows, out.source) == (INDEPENDENT, None)
    assert out.wrong == ((0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1))


# --- plausibility ------------------------------------------------------------------------------------


def test_row_sums_within_n_half_units(cli, tmp_path):
    # 0.50 + 0.30 + 0.10 = 0.90: 3 entries at 2 places allow ±0.015
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nweights: [[0.50, 0.30, 0.10], [~, ~, ~], [~, ~, ~]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    assert "  ✗ row t1 of weights sums to 0.9, not 1 (rounding allows ±0.015)" in out.splitlines()
    # 0.33 + 0.33 + 0.33 = 0.99 is within ±0.015
    report = audit_text("exercise: single-head-3x4\nweights: [[0.33, 0.33, 0.33], [~, ~, ~], [~, ~, ~]]\n")
    assert [f.ok for f in report.findings if f.check == "row_sums"] == [True]


def test_fully_masked_row_sums_to_zero():
    text = ("exercise: fully-masked-row-3x3\n"
            "weights: [[~, ~, ~], [~, ~, ~], [0, 0, 0]]\nhead_output: [[~, ~], [~, ~], [0, 0]]\n")
    report = audit_text(text)
    assert report.ok, [f.message for f in report.findings if not f.ok]


def test_row_sum_wording_names_the_fully_masked_row(cli, tmp_path):
    # fully-masked-row-3x3: row t1 may attend t1, t2 (scores 1, 1: weights 1/2, 1/2), t3 to no key
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: fully-masked-row-3x3\nweights: [[0.5, 0.5, 0], [~, ~, ~], [0, 0, 0]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 0
    assert ("  ✓ every row of weights sums to 1 within rounding, or to 0 for a query that may attend to no key (t3)"
            in out.splitlines())
    sol.write_text("exercise: fully-masked-row-3x3\nweights: [[0.5, 0.5, 0], [~, ~, ~], [~, ~, ~]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 0 and "  ✓ every row of weights sums to 1 within rounding" in out.splitlines()


def test_uniform_weights_on_a_fully_masked_row_are_flagged(cli, tmp_path):
    # by hand: Q = W_Q, K = W_K (x = I); scores row t1 = [1, 1, 2], t2 = [1, 0, 1]; t3 may attend to nothing.
    # masked_fill(-1e9) gives t3 the softmax of three equal numbers: 1/3 each, summing to 1 instead of 0
    r2 = math.sqrt(2)
    z = 2 * math.exp(1 / r2) + 1
    t2 = [math.exp(1 / r2) / z, 1 / z, math.exp(1 / r2) / z]
    row2 = ", ".join(f"{w:.4f}" for w in t2)
    sol = tmp_path / "s.yaml"
    sol.write_text(f"exercise: fully-masked-row-3x3\n"
                   f"weights: [[0.5000, 0.5000, 0], [{row2}], [0.3333, 0.3333, 0.3333]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    lines = out.splitlines()
    assert ("  ✗ row t3 of weights sums to 0.9999, not 0: query t3 may attend to no key, so its weights are all 0 "
            "(rounding allows ±0.00015)") in lines
    assert ("  ✗ weights gives weight where the mask blocks (it must be 0 there): "
            "[t3, t1] = 0.3333, [t3, t2] = 0.3333, [t3, t3] = 0.3333") in lines
    assert ("  Diagnosis: You gave uniform weights (1/3 each) to a query that may attend to no key (t3); its weights "
            "are all 0 and its output row is 0. Uniform weights are what the softmax gives when blocked scores are "
            "filled with a large negative number instead of -inf.") in lines
    assert "  ✗ wrong    weights  3 of 9 entries off" in lines


def test_mask_applied_in_the_scaled_step_is_diagnosed(cli, tmp_path):
    # two-head-causal-3x4, head 0 by hand: Q = K = [[2, 0], [0, 4], [2, 2]], scores = Q Kᵀ
    q = [[2, 0], [0, 4], [2, 2]]
    scaled = [[sum(a * b for a, b in zip(qi, kj)) / math.sqrt(2) for kj in q] for qi in q]
    assert [[round(v, 4) for v in r] for r in scaled] == [[2.8284, 0, 2.8284], [0, 11.3137, 5.6569],
                                                         [2.8284, 5.6569, 5.6569]]
    early = [[f"{v:.4f}" if j <= i else "-inf" for j, v in enumerate(r)] for i, r in enumerate(scaled)]
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: two-head-causal-3x4\nheads:\n  - scaled: " + json.dumps(early) + "\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    lines = out.splitlines()
    i = lines.index("First wrong step: scaled (head 1)")
    assert lines[i + 1:i + 5] == [
        "  [t1, t2]: you wrote -inf, the right value is 0",
        "  [t1, t3]: you wrote -inf, the right value is 2√2 (about 2.8284)",
        "  [t2, t3]: you wrote -inf, the right value is 4√2 (about 5.6569)",
        "  Diagnosis: You applied the mask in the scaled step; scaled = scores / √2 at every entry, and the "
        "blocked entries become -inf only in the next step (masked = scaled + M).",
    ]
    assert "No known misconception explains it." not in out


def test_whole_numbers_for_rounded_values_are_exact_claims(cli, tmp_path):
    # two-head-causal-3x4, head 0, row t2: masked = [0, 16/√2, -inf], so the weights are
    # 1/(1 + e^(8√2)) = 0.000012 and 0.999988: `0` and `1` claim exactly 0 and 1, and are wrong
    small = 1 / (1 + math.exp(16 / math.sqrt(2)))
    assert (f"{small:.6f}", f"{1 - small:.6f}") == ("0.000012", "0.999988")
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: two-head-causal-3x4\nheads:\n  - weights: [[1, 0, 0], [0, 1, 0], [0.0287, 0.4856, 0.4856]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1  # the verdict stands: integers are exact claims
    lines = out.splitlines()
    i = lines.index("First wrong step: weights (head 1)")
    assert lines[i + 1:i + 4] == [
        "  [t2, t1]: you wrote 0, an exact claim; the value is 0.000012 — write 0.0000 for a rounded value",
        "  [t2, t2]: you wrote 1, an exact claim; the value is 0.999988 — write 1.0000 for a rounded value",
        "  What follows from it:",
    ]
    code, out, _ = cli("check", str(sol), "--format", "json")
    (w,) = json.loads(out)["steps"]
    assert [c["cell"] for c in w["exact_claims"]] == [[1, 0], [1, 1]]
    # one such entry alone: the note, not a worked single-entry slip
    report = audit_text("exercise: two-head-causal-3x4\nheads:\n  - weights: [[1, 0, 0], [0, 1.0000, 0], [0.0287, 0.4856, 0.4856]]\n")
    (w,) = report.steps
    assert w.wrong == ((1, 0),) and w.diagnoses == ()
    assert str(w.exact_claims[0][1]).startswith("[t2, t1]: you wrote 0, an exact claim; the value is 0.000012")


def test_a_whole_number_far_from_the_value_is_just_wrong():
    # weights[t1, t1] of the classic is 0.1084: 0 is not its rounding at 4 places, so no note
    report = audit_text("exercise: single-head-3x4\nweights: [[0, 0.4458, 0.4458], [~, ~, ~], [~, ~, ~]]\n")
    (w,) = report.steps
    assert w.wrong == ((0, 0),) and w.exact_claims == ()


def test_a_later_wrong_step_shows_its_exact_claims(cli, tmp_path):
    # scaled is wrong first (not divided by √2); the weights, right but for two whole numbers, show their notes
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: two-head-causal-3x4\nheads:\n"
                   "  - scaled: [[4, 0, 4], [0, 16, 8], [4, 8, 8]]\n"
                   "    weights: [[1, 0, 0], [0, 1, 0], [0.0287, 0.4856, 0.4856]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    lines = out.splitlines()
    i = lines.index("  ✗ wrong    weights (head 1)  2 of 9 entries off; wrong on its own, not only because of an earlier step")
    assert lines[i + 1].strip() == "[t2, t1]: you wrote 0, an exact claim; the value is 0.000012 — write 0.0000 for a rounded value"


def test_output_outside_the_range_of_v(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nhead_output: [[2.5, 1.9], [1.97, 1.97], [1.97, 1.97]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    assert ("  ✗ head_output leaves the range of V, which a weighted average cannot: "
            "[t1, d1] = 2.5 is outside [1, 2] (column d1)") in out.splitlines()


def test_range_uses_the_authors_v():
    # the author's V column d1 is [1, 2, 3]: 2.5 is inside it (but head_output is still wrong)
    text = ("exercise: single-head-3x4\nv: [[1, 1], [2, 2], [3, 2]]\n"
            "head_output: [[2.5, 1.89], [~, ~], [~, ~]]\n")
    report = audit_text(text)
    col = [f for f in report.findings if f.check == "column_range"]
    assert [f.ok for f in col] == [True] and "your V" in col[0].message


def test_wrong_shape_is_a_finding_and_a_diagnosis(cli, tmp_path):
    # K Qᵀ in cross-attention is [3×2], not [2×3]
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: cross-attention-2x3\nscores: [[1, 0], [0, 1], [1, 1]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    lines = out.splitlines()
    assert "  ✗ wrong    scores  size [3×2], but the step is [2×3]" in lines
    assert "  ✗ scores is [3×2], but Q [2×2] · Kᵀ [2×3] → scores [2×3]" in lines
    assert ("  Diagnosis: You computed K·Qᵀ instead of Q·Kᵀ: scores = Q·Kᵀ, one row per query and one column "
            "per key.") in lines


def test_weights_outside_zero_one():
    report = audit_text("exercise: single-head-3x4\nweights: [[1.2, -0.1, -0.1], [~, ~, ~], [~, ~, ~]]\n")
    bad = [f for f in report.findings if not f.ok]
    assert [f.check for f in bad] == ["weights_range"]
    assert bad[0].message == "weights has entries outside [0, 1]: [t1, t1] = 1.2, [t1, t2] = -0.1, [t1, t3] = -0.1"


def test_key_padding_column_must_get_no_weight():
    # padding-4x2: key PAD (column 4) is padding; row t1 giving it weight fails the mask check
    text = "exercise: padding-4x2\nweights: [[0.25, 0.25, 0.25, 0.25], [~, ~, ~, ~], [~, ~, ~, ~], [~, ~, ~, ~]]\n"
    report = audit_text(text)
    masked = [f for f in report.findings if f.check == "masked_zero"]
    assert [f.ok for f in masked] == [False] and masked[0].cells == ((0, 3),)


# --- terminals ---------------------------------------------------------------------------------------


def test_ascii_console_gets_words_and_ascii_symbols(cli_encoded):
    r = cli_encoded("check", "homework-no-scaling.yaml", encoding="ascii", cwd=DATA, env={"NO_COLOR": "1", "COLUMNS": "100"})
    assert r.code == 1, r.stderr
    out = r.stdout.decode("ascii")  # raises if any byte is not ASCII
    assert "  x wrong     scaled       9 of 9 entries off" in out
    assert "  ok correct  q            6 entries right" in out
    assert "scaled = scores / sqrt(2)." in out
    assert "  [t1, t2]: you wrote 4, the right value is 2*sqrt(2) (about 2.8284)" in out  # the answer grammar


def test_no_color_turns_the_colours_off_even_on_a_colour_terminal(cli):
    """NO_COLOR on a stream rich takes for a colour terminal: not one colour code, the verdicts still in
    words; without NO_COLOR the same report is coloured."""
    code, out, _ = cli("check", "blog-single-head-3x4.yaml", cwd=DATA, env={**COLOUR_TERMINAL, "NO_COLOR": "1"})
    assert code == 1 and "✗ wrong" in out and not COLOUR.search(out)
    code, out, _ = cli("check", "blog-single-head-3x4.yaml", cwd=DATA, env=COLOUR_TERMINAL)
    assert code == 1 and COLOUR.search(out)


def test_empty_file(tmp_path, cli):
    sol = tmp_path / "s.yaml"
    sol.write_text("")
    code, _, err = cli("check", str(sol))
    assert code == 2
    assert err == (f"error: {sol}:1:1: the file is empty (a solution file needs at least `exercise: ID` and one "
                   "step, e.g. `scores: [[2, 4], [4, 8]]`)\n")


@pytest.mark.parametrize("text", [
    "exercise: single-head-3x4\n",
    "# no steps yet\nexercise: single-head-3x4\nsource: a draft\n",
    "exercise: two-head-causal-3x4\nheads: [{}, ~]\n",
    "exercise: two-head-causal-3x4\nheads: []\n",
])
def test_a_file_without_steps_is_unusable(tmp_path, cli, text):
    sol = tmp_path / "s.yaml"
    sol.write_text(text)
    line = 2 if text.startswith("#") else 1
    code, out, err = cli("check", str(sol))
    assert (code, out) == (2, "")
    assert err == (f"error: {sol}:{line}:1: the file gives no step to check (a solution file needs at least "
                   "`exercise: ID` and one step, e.g. `scores: [[2, 4], [4, 8]]`)\n")


def test_an_exercise_file_is_named_as_such(cli):
    path = str(REPO / "exercises" / "single-head-3x4.yaml")  # line 1 is a comment; the fields start at line 2
    expected = (f"error: {path}:2:1: this is an exercise file (it has id, x, heads[].w_q and no 'exercise' field), "
                f"not a solution file (to see its solution run `attn-tutor explain {path}`; to check a solution, "
                "write a solution file as docs/exercise-format.md describes)\n")
    code, out, err = cli("check", path)
    assert (code, out, err) == (2, "", expected)
    code, out, err = cli("check", path, "--exercise", "single-head-3x4")  # still not a solution
    assert (code, out, err) == (2, "", expected)
    with pytest.raises(ExerciseError, match=r"it has x, num_heads, w_q, w_k, w_v, w_o and no 'exercise' field"):
        read_solution((REPO / "exercises" / "two-head-fused-3x4.yaml").read_text().replace("id:", "#"), "e.yaml")


# --- never a traceback -------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True),
                     st.sampled_from(["1/3", "-inf", "sqrt(2)", "x", "", "1e999", "2^99", "0.4500", "exp(1000)"]))
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.sampled_from(["q", "weights", "masked", "heads", "concat", "output", "zz"]), c, max_size=3), max_leaves=20)
_files = st.dictionaries(
    st.sampled_from(["exercise", "q", "k", "scores", "scaled", "masked", "weights", "head_output", "concat",
                     "output", "heads", "source", "wat"]),
    _values, max_size=5,
).map(lambda d: {**d, "exercise": d.get("exercise", "two-head-causal-3x4")})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files)
def test_any_structure_is_a_report_or_an_error(data):
    import yaml

    from tutor.base.errors import TutorError

    text = yaml.safe_dump(data)
    try:
        report = audit(read_solution(text, "sol.yaml", base=DATA))
    except TutorError as err:
        assert str(err)
        return
    assert report.exit_code in (0, 1)


_SHAPES = {"q": (3, 2), "k": (3, 2), "v": (3, 2), "scores": (3, 3), "scaled": (3, 3), "weights": (3, 3),
           "head_output": (3, 2)}
_entries = st.one_of(st.integers(-1000, 1000), st.just("-inf"), st.just(None), st.just("1/3"),
                     st.floats(-1e6, 1e6).map(lambda x: f"{x:.3f}"), st.floats(0, 1).map(lambda x: f"{x:.2f}"))


@st.composite
def _right_shaped(draw):
    steps = draw(st.lists(st.sampled_from(sorted(_SHAPES)), min_size=1, max_size=7, unique=True))
    lines = ["exercise: single-head-3x4"]
    for s in steps:
        r, c = _SHAPES[s]
        rows = [[draw(_entries) for _ in range(c)] for _ in range(r)]
        if all(e is None for row in rows for e in row):
            rows[0][0] = 1
        lines.append(f"{s}: " + json.dumps(rows).replace("null", "~"))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_right_shaped())
def test_any_numbers_give_a_full_report(text):
    import io

    from rich.console import Console

    from tutor.render.check import dumps, render

    report = audit(read_solution(text, "sol.yaml", base=DATA))
    assert report.exit_code in (0, 1)
    render(report, Console(file=io.StringIO(), width=100))
    json.loads(dumps(report))


def test_minus_inf_in_weights_fails_the_row_sum():
    report = audit_text("exercise: single-head-3x4\nweights: [[-inf, 0.5, 0.5], [~, ~, ~], [~, ~, ~]]\n")
    assert [f.ok for f in report.findings if f.check == "row_sums"] == [False]
