"""Issue 11, item 1: one grading rule for practice and check.

The true first weights row of the classic is 1/(1 + 2·e^√2), e^√2/(1 + 2·e^√2) twice (scaled
scores √2, 2√2, 2√2): worked out below with math, not with the engines.  A decimal written to p
places claims ± 0.5·10⁻ᵖ, so 0.1044 (claiming [0.10435, 0.10445]) is wrong for 0.1084 in both
commands, and 0.11 (claiming [0.105, 0.115]) is right in both.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from .test_practice_cli import practise, store_path

pytestmark = pytest.mark.usefixtures("child_environment")  # store_path() reads where it puts the store

R2 = math.sqrt(2)
ROW1 = [1 / (1 + 2 * math.exp(R2)), math.exp(R2) / (1 + 2 * math.exp(R2))]  # 0.10838, 0.44581
ROW2 = [1 / (1 + 2 * math.exp(2 * R2)), math.exp(2 * R2) / (1 + 2 * math.exp(2 * R2))]  # 0.02870, 0.48565

WRONG = "0.1044 0.4478 0.4478; 0.0287 0.4856 0.4856; 0.0287 0.4856 0.4856"
RIGHT = "0.11 0.45 0.45; 0.03 0.49 0.49; 0.03 0.49 0.49"


def test_the_numbers_of_the_issue_by_hand():
    assert [round(v, 4) for v in ROW1] == [0.1084, 0.4458] and [round(v, 4) for v in ROW2] == [0.0287, 0.4856]
    assert not 0.10435 <= ROW1[0] <= 0.10445  # 0.1044 is wrong
    assert 0.105 <= ROW1[0] <= 0.115 and 0.445 <= ROW1[1] <= 0.455  # 0.11, 0.45 are right
    assert 0.025 <= ROW2[0] <= 0.035 and 0.485 <= ROW2[1] <= 0.495  # 0.03, 0.49 are right


def solution_file(folder: Path, typed: str) -> Path:
    """The typed matrix as a solution file, each number written as typed (0.10 keeps its two places)."""
    rows = [row.split() for row in typed.split(";")]
    path = folder / "weights.yaml"
    text = "exercise: single-head-3x4\nweights: [" + ", ".join("[" + ", ".join(row) + "]" for row in rows) + "]\n"
    path.write_text(text)
    return path


def test_done_when_practice_and_check_give_the_same_verdicts(cli, tmp_path):
    code, out, _ = practise(cli, WRONG + "\nquit\n", "single-head-3x4", "--steps", "weights")
    assert code == 0
    assert "✗ Not yet: 3 of 9 entries wrong (marked ✗)." in out
    assert any("0.1044 ✗" in line for line in out)
    code, out, _ = practise(cli, RIGHT + "\n", "single-head-3x4", "--steps", "weights")
    assert code == 0 and "✓ Right." in out
    code, out, _ = cli("check", solution_file(tmp_path, WRONG))
    assert code == 1 and "  ✗ wrong    weights  3 of 9 entries off" in out
    assert "  [t1, t1]: you wrote 0.1044, the right value is 0.1084" in out
    code, out, _ = cli("check", solution_file(tmp_path, RIGHT))
    assert code == 0 and "  ✓ correct  weights  9 entries right" in out


def test_a_coarse_answer_is_neither_right_nor_wrong_and_not_recorded(cli):
    code, out, _ = practise(cli, "0.1 0.4 0.4; 0.0 0.5 0.5; 0.0 0.5 0.5\n" + RIGHT + "\n",
                            "single-head-3x4", "--steps", "weights")
    assert code == 0
    assert ("Give at least 2 decimals for every entry (e.g. 0.11): a coarser value is neither right nor wrong, "
            "and nothing is recorded. Type the matrix again.") in " ".join(out)
    assert "✓ Right." in out  # the next answer is the first try
    conn = sqlite3.connect(store_path())
    assert conn.execute("SELECT outcome, attempt FROM answers").fetchall() == [("correct", 1)]


def test_an_integer_for_a_value_that_is_not_one(cli):
    # weights row t2 of head 2 of the causal exercise: 1/(1 + e^(-4√2)) = 0.9965, e^(-4√2)/(...) = 0.0035, 0
    w = 1 / (1 + math.exp(-4 * R2))
    assert round(w, 4) == 0.9965
    typed = f"1 0 0; 1 0 0; {ROW2[0]:.4f} {ROW2[1]:.4f} {ROW2[1]:.4f}"  # "1 for 0.9965", "0 for 0.0035"
    code, out, _ = practise(cli, typed + "\nquit\n", "two-head-causal-3x4", "--steps", "weights", "--head", "2")
    # a whole number is an exact form, in practice as in check (fix-rope, F20): wrong, and the note says why
    assert ("(t2, t1), (t2, t2): close, but a whole number, fraction or exact form must be exact; write a decimal "
            "such as 1.00 instead.") in " ".join(out)
    assert "Give at least 2 decimals" not in " ".join(out)


def test_truncation_is_named_in_practice_and_in_check(cli, tmp_path):
    cut = "0.10 0.44 0.44; 0.02 0.48 0.48; 0.02 0.48 0.48"
    code, out, _ = practise(cli, cut + "\nquit\n", "single-head-3x4", "--steps", "weights")
    text = " ".join(out)
    assert ("Every entry is cut off instead of rounded; round to the nearest (0.10838 to 2 decimals is 0.11, not "
            "0.10).") in text
    assert "No known mistake explains this answer" not in text
    conn = sqlite3.connect(store_path())
    assert conn.execute("SELECT key, kind FROM mistakes").fetchall() == [("truncated_decimal", "grading")]
    code, out, _ = cli("check", solution_file(tmp_path, cut), "--format", "json")
    notes = json.loads(out)["steps"][0]["notes"]
    assert code == 1 and [n["key"] for n in notes] == ["truncated_decimal"] and len(notes[0]["cells"]) == 9


def test_check_notes_entries_coarser_than_two_places(cli, tmp_path):
    code, out, _ = cli("check", solution_file(tmp_path, "0.1 0.4 0.4; 0.03 0.49 0.49; 0.03 0.49 0.49"))
    assert code == 0  # right at the precision published
    assert ("[t1, t1] = 0.1, [t1, t2] = 0.4, [t1, t3] = 0.4: written to fewer than 2 decimals; right within that "
            "rounding, which says little.") in " ".join(out.split())


@pytest.mark.parametrize("command", ["practice", "check"])
def test_tolerance_overrides_the_interval_in_both_commands(cli, tmp_path, command):
    loose = WRONG.replace("0.1044 0.4478 0.4478", "0.1034 0.4483 0.4483")  # 0.005 and 0.0025 off; rows sum to 1
    if command == "practice":
        code, out, _ = practise(cli, loose + "\n", "single-head-3x4", "--steps", "weights", "--tolerance", "0.006")
        assert "✓ Right." in out
        code, out, _ = practise(cli, loose + "\nquit\n", "single-head-3x4", "--steps", "weights", "--restart")
        assert "✓ Right." not in out
    else:
        path = solution_file(tmp_path, loose)
        assert cli("check", path, "--tolerance", "0.006").code == 0
        assert cli("check", path).code == 1
        assert cli("check", path, "--tolerance", "-1").code == 2


def test_the_rule_is_documented_once_in_the_readme_and_in_both_helps(cli):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert readme.count("## Grading") == 1 and "± 0.5·10⁻ᵖ" in readme
    for command in ("practice", "check"):
        code, out, _ = cli(command, "--help", env={"COLUMNS": "200"})
        text = " ".join(out.split())
        assert code == 0 and "a decimal claims its value to within half a unit in its last place" in text
