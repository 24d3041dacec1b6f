"""`attn-tutor explain` and `attn-tutor list`, as a user runs them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import COLOUR, COLOUR_TERMINAL, EXERCISES, REPO

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

GOLDEN = REPO / "tests" / "golden"
BUNDLED_IDS = sorted(p.stem for p in EXERCISES.glob("*.yaml"))


# --- the classic example -------------------------------------------------------

def test_json_classic_every_step_by_hand(cli):
    code, out, err = cli("explain", "single-head-3x4", "--format", "json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    steps = {s["id"]: s for s in doc["steps"]}
    assert [s["id"] for s in doc["steps"]] == ["q", "k", "v", "scores", "scaled", "weights", "head_output"]
    assert all(s["head"] == 0 for s in doc["steps"])
    # Q = K = V = X W: rows (1,0,1,0)·W = (1,1); (0,2,0,2)·W = (2,2); (1,1,1,1)·W = (2,2)
    for sid in ("q", "k", "v"):
        assert steps[sid]["exact"] == [["1", "1"], ["2", "2"], ["2", "2"]]
        assert steps[sid]["shape"] == [3, 2]
    assert steps["scores"]["exact"] == [["2", "4", "4"], ["4", "8", "8"], ["4", "8", "8"]]
    assert steps["scaled"]["exact"][0] == ["sqrt(2)", "2*sqrt(2)", "2*sqrt(2)"]
    assert steps["scaled"]["value"][1][1] == pytest.approx(8 / math.sqrt(2), abs=1e-15)
    # softmax of (√2, 2√2, 2√2): w0 = 1 / (1 + 2 e^{√2})
    w0 = 1 / (1 + 2 * math.exp(math.sqrt(2)))
    w1 = (1 - w0) / 2
    assert steps["weights"]["exact"][0] == ["1/(1 + 2*exp(sqrt(2)))", "1/(2 + exp(-sqrt(2)))", "1/(2 + exp(-sqrt(2)))"]
    assert steps["weights"]["value"][0] == pytest.approx([w0, w1, w1], abs=1e-14)
    assert round(steps["weights"]["value"][0][0], 4) == 0.1084
    # head output row 0: w0·1 + w1·2 + w1·2
    assert steps["head_output"]["value"][0] == pytest.approx([w0 + 4 * w1] * 2, abs=1e-14)
    assert steps["head_output"]["exact"][0][0] == "(4 + exp(-sqrt(2)))/(2 + exp(-sqrt(2)))"
    assert doc["exercise"]["id"] == "single-head-3x4"
    assert doc["exercise"]["d_k"] == 2 and doc["exercise"]["L"] == 3


def test_json_masked_values_are_null(cli):
    code, out, _ = cli("explain", "two-head-causal-3x4", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    masked = [s for s in doc["steps"] if s["id"] == "masked"]
    assert [s["head"] for s in masked] == [0, 1]
    for s in masked:
        for i in range(3):
            for j in range(3):
                if j > i:  # causal: key j hidden from query i
                    assert s["exact"][i][j] == "-inf" and s["value"][i][j] is None
                else:
                    assert s["value"][i][j] is not None
    assert [s["id"] for s in doc["steps"]][-2:] == ["concat", "output"]
    assert doc["steps"][-1]["head"] is None


def test_head_option_keeps_layer_steps(cli):
    code, out, _ = cli("explain", "two-head-causal-3x4", "--head", "2", "--format", "json")  # the second head
    assert code == 0
    heads = [s["head"] for s in json.loads(out)["steps"]]
    assert set(heads) == {1, None}  # JSON keeps 0-based indices


def test_rich_classic_golden(cli):
    """What a learner reads, to the character (width 100, no colour)."""
    code, out, err = cli("explain", "single-head-3x4")
    assert code == 0 and err == ""
    golden = GOLDEN / "explain-single-head-3x4.txt"
    if os.environ.get("ATTN_TUTOR_UPDATE_GOLDEN") == "1":  # pragma: no cover - regenerating by hand
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(out)
    assert out == golden.read_text()


def test_rich_classic_shows_the_essentials(cli):
    _, out, _ = cli("explain", "single-head-3x4")
    assert "X [3×4] · W_Q [4×2] → Q [3×2]" in out
    assert "1/(1 + 2·exp(√2)) ≈ 0.1084" in out
    assert "variance d_k" in out  # why 1/√d_k
    assert "Dimension flow" in out
    assert "Attention weights, head 1" in out  # the heatmap


def test_precision_option(cli):
    _, out, _ = cli("explain", "single-head-3x4", "--precision", "6")
    assert "0.108383" in out  # 1/(1 + 2e^√2) = 0.1083834...


@pytest.mark.parametrize("exercise_id", BUNDLED_IDS)
def test_every_bundled_exercise_explains(cli, exercise_id):
    code, out, err = cli("explain", exercise_id)
    assert code == 0 and err == "" and "Traceback" not in out


def test_output_projection_says_it_is_linear_and_the_layer_is_not(cli):
    _, out, _ = cli("explain", "two-head-fused-3x4")
    flat = " ".join(out.split())
    assert "W_O is a linear map" in flat and "not linear in X" in flat and "no non-linearity" not in flat


def test_fully_masked_row_is_explained(cli):
    _, out, _ = cli("explain", "fully-masked-row-3x3")
    assert "Row t3 may attend to no key at all" in out


# --- terminals: ASCII, narrow, no colour --------------------------------------

def test_ascii_stream_has_no_unicode_and_keeps_exact_forms(cli_encoded):
    r = cli_encoded("explain", "two-head-causal-3x4", encoding="ascii", env={"COLUMNS": "80"})
    assert r.code == 0, r.stderr
    out = r.stdout.decode("ascii")  # raises if any byte is not ASCII
    assert "X [3x4] * W_Q [4x2] -> Q [3x2]" in out
    assert "1/(1 + exp(8*sqrt(2)))" in out
    assert "+----" in out


def test_narrow_terminal_never_cuts_numbers(cli):
    code, out, err = cli("explain", "two-head-fused-3x4", env={"COLUMNS": "60", "NO_COLOR": "1"})
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 60
    # every decimal of the output projection appears whole
    doc = json.loads(cli("explain", "two-head-fused-3x4", "--format", "json").out)
    output = next(s for s in doc["steps"] if s["id"] == "output")
    for row in output["value"]:
        for v in row:
            assert f"{v:.4f}" in out or str(int(v)) in out


def test_no_color_turns_the_colours_off_even_on_a_colour_terminal(cli):
    """NO_COLOR on a stream rich takes for a colour terminal: not one colour code (bold and dim may stay);
    without NO_COLOR the same run is coloured."""
    code, out, _ = cli("explain", "single-head-3x4", env={**COLOUR_TERMINAL, "NO_COLOR": "1"})
    assert code == 0 and "Exact entries:" in out and not COLOUR.search(out)
    code, out, _ = cli("explain", "single-head-3x4", env=COLOUR_TERMINAL)
    assert code == 0 and COLOUR.search(out)


# --- list ------------------------------------------------------------------------

def test_list_json_has_every_bundled_exercise(cli):
    code, out, _ = cli("list", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert sorted(r["id"] for r in rows) == BUNDLED_IDS
    assert len(rows) >= 6
    classic = next(r for r in rows if r["id"] == "single-head-3x4")
    assert (classic["L"], classic["L_k"], classic["d_model"], classic["heads"], classic["mask"]) == (3, 3, 4, 1, "none")
    cross = next(r for r in rows if r["id"] == "cross-attention-2x3")
    assert cross["L"] != cross["L_k"]


def test_list_rich(cli):
    code, out, _ = cli("list")
    assert code == 0
    for exercise_id in BUNDLED_IDS:
        assert exercise_id in out


def fast_commands() -> list[list[str]]:
    """``--help``, every registered command's ``--help`` (a group's subcommands' too), and ``list``."""
    import typer

    from tutor.cli import COMMANDS

    argv = [["--help"], ["list"], ["list", "--format", "json"]]
    for name, function, _ in COMMANDS:
        argv.append([name, "--help"])
        if isinstance(function, typer.Typer):
            argv += [[name, str(sub.name), "--help"] for sub in function.registered_commands]
    return argv


@pytest.mark.parametrize("argv", fast_commands(), ids=" ".join)
def test_fast_commands_import_neither_the_step_catalogue_nor_sympy_nor_numpy(argv):
    """Start-up (issue 19, item 7): neither help nor ``list`` imports any of them (``list`` counts each
    exercise's steps with :mod:`tutor.authoring.steplist`, which ``tests/test_catalogue.py`` holds equal to
    the catalogue)."""
    code = (
        "import sys, io, contextlib\n"
        "from tutor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main({argv!r})\n"
        "print(code, bool(out.getvalue()), sorted(m for m in ('tutor.steps', 'sympy', 'numpy') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0 True []"


# --- errors ----------------------------------------------------------------------

def test_malformed_file_exits_2_with_file_line_messages(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\ntitle: t\nx: [[1, yes], [0, 1]]\nheads:\n  - w_q: [[1], [0], [1]]\n    w_k: [[1], [0]]\n    w_v: [[1], [0]]\n")
    code, out, err = cli("explain", str(bad))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        f"error: {bad}:3:9: x[0][1]: expected a number (integer, decimal, or a fraction such as \"1/3\"), "
        "found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)"
    )
    assert "Traceback" not in err


def test_shape_error_names_both_sides(tmp_path, cli):
    bad = tmp_path / "shape.yaml"
    bad.write_text("id: bad\ntitle: t\nx: [[1, 0, 1, 0]]\nheads:\n  - w_q: [[1], [0], [1]]\n    w_k: [[1], [0], [1], [0]]\n    w_v: [[1], [0], [1], [0]]\n")
    code, _, err = cli("explain", str(bad))
    assert code == 2
    assert err == (f"error: {bad}:5:10: heads[0].w_q: w_q has 3 rows but x has 4 columns (d_model) "
                   "(w_q needs one row per column of x: 4 rows)\n")


def test_unknown_exercise(cli):
    code, out, err = cli("explain", "no-such-exercise")
    assert code == 2 and out == ""
    assert err == "error: no exercise 'no-such-exercise': not a bundled id, nor a file (run `attn-tutor list` to see the ids)\n"


def test_missing_path(cli, tmp_path):
    code, _, err = cli("explain", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml" in err


def test_head_out_of_range_is_a_usage_error(cli):
    code, _, err = cli("explain", "single-head-3x4", "--head", "2")
    assert code == 2
    assert "there is no head 2" in err


def test_bad_format_is_a_usage_error(cli):
    code, _, _ = cli("explain", "single-head-3x4", "--format", "xml")
    assert code == 2


def test_broken_pipe_is_quiet():
    p = subprocess.Popen([sys.executable, "-m", "tutor", "explain", "two-head-fused-3x4"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=30)
    assert b"Traceback" not in err


# --- the message catalogue ---------------------------------------------------------

def test_every_message_key_used_exists():
    import re

    from tutor.base.messages import EN

    used = set()
    for path in (REPO / "tutor").rglob("*.py"):
        used |= set(re.findall(r'\bt\(\s*"([a-z0-9_.]+)"', path.read_text()))
    missing = sorted(k for k in used if k not in EN)
    assert missing == []


def test_every_step_has_a_title_and_a_reason():
    from tutor.base.messages import EN
    from tutor.steps import STEP_IDS

    for sid in STEP_IDS:
        assert f"step.{sid}.title" in EN and f"step.{sid}.why" in EN


def test_bundled_exercises_ship_in_the_wheel():
    text = (REPO / "pyproject.toml").read_text()
    assert '"exercises" = "tutor/exercises"' in text


def test_bundled_dir_found_from_installed_or_source():
    from tutor.exercise.catalog import bundled_dir

    assert sorted(p.stem for p in Path(bundled_dir()).glob("*.yaml")) == BUNDLED_IDS


# --- the two engines check each other ------------------------------------------------

def test_explain_refuses_when_the_engines_disagree(cli, monkeypatch):
    import importlib

    verify = importlib.import_module("tutor.production.verify")  # the module (the package exports its function)

    real = verify.run_exercise

    def off_by_a_little(ex, dtype=None, backward=False):
        run = real(ex, backward=backward)
        run.weights[0, 0, 0] += 1e-6  # a bug in one engine
        return run

    monkeypatch.setattr(verify, "run_exercise", off_by_a_little)
    for fmt in ("rich", "json"):
        code, out, err = cli("explain", "single-head-3x4", "--format", fmt)
        assert code == 2
        assert err.startswith("error: the exact engine and the NumPy core disagree at step weights (head 1), entry (1, 1)")
        assert "no solution is printed" in err
        if fmt == "rich":
            assert out == ""
        else:  # no solution, but the error document a script parses (issue 8, G.24)
            doc = json.loads(out)
            assert (doc["error"], doc["exit_code"]) == ("input", 2) and "steps" not in doc
            assert doc["errors"][0]["message"] == err.splitlines()[0].removeprefix("error: ")


def test_production_view_names_the_reshapes(cli):
    _, out, _ = cli("explain", "two-head-fused-3x4")
    assert "Production view" in out
    assert "[B, L, 3, H, d_k] = [1, 3, 3, 2, 2]" in out
    assert "permute(2, 0, 3, 1, 4)" in out
    assert "[B, H, L, L] = [1, 2, 3, 3]" in out
    _, out, _ = cli("explain", "two-head-fused-3x4", "--format", "json")
    names = [p["name"] for p in json.loads(out)["production"]]
    assert names[:4] == ["x", "qkv", "view", "permute"] and names[-1] == "out_proj"


# --- what a new user tried -----------------------------------------------------------

def test_a_closed_pipe_keeps_the_commands_exit_code():
    """`check … | head -1`: the reader leaves, the verdict (exit 1: a step is wrong) stays."""
    for solution, expected in (("blog-single-head-3x4.yaml", 1), ("classic-correct.yaml", 0)):
        p = subprocess.Popen([sys.executable, "-m", "tutor", "check", f"tests/data/check/{solution}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read()
        assert p.wait(timeout=60) == expected and b"Traceback" not in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["list"], ["explain", "single-head-3x4", "--format", "json"], ["schema"]])
def test_an_unwritable_output_is_one_error_line(argv):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "tutor", *argv], stdout=full, stderr=subprocess.PIPE, cwd=REPO)
    assert r.returncode == 2
    assert r.stderr.decode() == "error: cannot write the output: the disk is full (no space left on the device)\n"


def test_token_labels_are_shown_as_written_never_as_markup(tmp_path, cli):
    path = tmp_path / "markup.yaml"
    path.write_text('id: markup\ntitle: "[bold]t[/bold]"\ntokens: ["[/]", "[red]b[/red]"]\nx: [[1, 0], [0, 1]]\n'
                    "heads:\n  - {w_q: [[1], [0]], w_k: [[1], [0]], w_v: [[1], [1]]}\n")
    code, out, err = cli("explain", str(path))
    assert code == 0 and err == ""
    assert "│ [/] │" in out and "[red]b[/red]" in out and "[bold]t[/bold]" in out


def test_entries_beyond_a_million_are_refused(tmp_path, cli):
    path = tmp_path / "big.yaml"
    path.write_text("id: big\ntitle: t\nx: [[1234567890123456789012345678901234567890, 1]]\n"
                    "heads:\n  - {w_q: [[1], [1]], w_k: [[1], [1]], w_v: [[1], [1]]}\n")
    code, out, err = cli("explain", str(path))
    assert code == 2 and out == ""
    assert err.rstrip().endswith("(entries are limited to ±1,000,000)")


def test_explain_given_a_solution_file_says_so(cli):
    code, _, err = cli("explain", "tests/data/check/classic-correct.yaml")
    assert code == 2
    assert err == ("error: tests/data/check/classic-correct.yaml:2:1: exercise: this is a solution file (it names the "
                   "exercise it solves), not an exercise (audit it with `attn-tutor check "
                   "tests/data/check/classic-correct.yaml`)\n")


def test_version(cli):
    from tutor import __version__

    code, out, _ = cli("--version")
    assert (code, out) == (0, f"attn-tutor {__version__}\n")


def test_dimension_flow_follows_the_head_shown(cli):
    _, out, _ = cli("explain", "two-head-causal-3x4", "--head", "2")
    per_head = out[out.index("Dimension flow"):out.index("(the same for each of the 2 heads)")]
    assert "weights [3×3] · V [3×2] → head_2 [3×2]" in per_head and "head_1" not in per_head


def test_one_head_wording(cli):
    code, _, err = cli("explain", "single-head-3x4", "--head", "2")
    assert code == 2 and "this exercise has one head, head 1" in err


@pytest.mark.parametrize("exercise_id", BUNDLED_IDS)
def test_the_engines_agree_on_every_bundled_exercise(exercise_id):
    from tutor.exercise.catalog import resolve
    from tutor.production.verify import verify
    from tutor.steps import solve

    verify(solve(resolve(exercise_id)))  # raises EngineMismatchError on any step beyond 1e-9


@pytest.mark.parametrize("exercise", ["single-head-3x4", "two-head-causal-3x4", "padding-4x2"])
def test_heatmap_legend_bands_hold_every_shaded_weight(cli, exercise):
    """Each shade of the heat map lies in the band its legend gives, checked against the exact weights."""
    import re

    from tutor.exercise.catalog import resolve
    from tutor.steps import solve

    code, out, _ = cli("explain", exercise, env={"COLUMNS": "200"})
    assert code == 0
    legend = next(line for line in out.splitlines() if line.strip().startswith("Shades:"))
    bands = {shade[0]: (float(lo), float(hi)) for shade, lo, hi in re.findall(r"(\S)\1 above ([\d.]+) up to ([\d.]+)", legend)}
    assert len(bands) == 4 and "none: exactly 0" in legend
    sol = solve(resolve(exercise))
    heads = [s for s in sol.steps if s.name == "weights"]
    blocks = out.split("(darker = more weight)")[1:]
    assert len(blocks) == len(heads)
    for step, block in zip(heads, blocks, strict=True):
        table = block.split("Shades:")[0]
        rows = [line for line in table.splitlines() if re.match(r"\s*│ \S+ +│", line)]  # labelled rows, not the header
        assert len(rows) == len(step.value)
        for row, values in zip(rows, step.value, strict=True):
            cells = [c.strip() for c in row.split("│")[2:-1]]
            for cell, v in zip(cells, values, strict=True):
                shade = cell[0] if cell[0] in bands else None
                if shade is None:
                    assert v == 0, (cell, v)
                else:
                    lo, hi = bands[shade]
                    assert lo < v <= hi, (cell, v, lo, hi)


def test_a_weight_that_underflows_is_shaded_not_blank(cli, tmp_path):
    """A bias of ±800: the weight exp(-1600)/(1 + exp(-1600)) is 0 in float64 but not 0; the legend says blank
    is exactly 0, so it takes the lightest shade (a masked key stays blank)."""
    f = tmp_path / "b.yaml"
    f.write_text("id: bias-800\ntitle: huge bias\nx: [[1, 0], [0, 1]]\nheads:\n"
                 "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
                 "attn_bias: [[800, -800], [-800, 800]]\n")
    code, out, err = cli("explain", str(f), env={"COLUMNS": "120"})
    assert code == 0, err
    table = out.split("(darker = more weight)")[1].split("Shades:")[0]
    assert "░░ 0.00" in table and "██ 1.00" in table
    assert not any(cell.strip() == "0.00" for line in table.splitlines() for cell in line.split("│"))
