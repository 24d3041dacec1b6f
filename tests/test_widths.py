"""Widths are clamped from above as from below (issue 8, second round, item 7).

``COLUMNS=1000000 attn-tutor explain single-head-3x4`` wrote 23 MB (some lines are as wide as the console)
and ``COLUMNS=99999999 --precision 15`` ran for minutes.  Every console is laid out at most
:data:`tutor.render.MAX_WIDTH` columns wide, as at least :data:`tutor.render.MIN_WIDTH`: ``COLUMNS``,
typer's ``TERMINAL_WIDTH`` and the terminal's own size alike.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tutor.render import MAX_WIDTH

from .conftest import REPO

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

SGR = re.compile(r"\x1b\[[0-9;]*m")


def widest(text: str) -> int:
    return max((len(SGR.sub("", line)) for line in text.splitlines()), default=0)


COMMANDS = [
    ["explain", "single-head-3x4"],
    ["explain", "two-head-causal-3x4", "--precision", "15"],
    ["explain", "single-head-3x4", "--blank"],
    ["list"],
    ["stats"],
    ["check", str(REPO / "tests" / "data" / "check" / "homework-no-scaling.yaml")],
    ["validate", str(REPO / "exercises")],
    ["--help"],
    ["explain", "--help"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("columns", ["1000000", "99999999", str(MAX_WIDTH + 1)])
def test_a_huge_columns_lays_out_as_the_maximum(cli, args, columns):
    huge = cli(*args, env={"COLUMNS": columns})
    at_max = cli(*args, env={"COLUMNS": str(MAX_WIDTH)})
    assert huge == at_max
    assert widest(huge.out) <= MAX_WIDTH and widest(huge.err) <= MAX_WIDTH


def test_the_maximum_is_reached_not_only_bounded(cli):
    """The clamp lowers to the maximum, it does not fall back to a default: a wide layout stays wide."""
    assert widest(cli("--help", env={"COLUMNS": "1000000"}).out) == MAX_WIDTH


@pytest.mark.parametrize("env", [{"COLUMNS": "99999999"}, {"TERMINAL_WIDTH": "99999999", "COLUMNS": None}],
                         ids=["COLUMNS", "TERMINAL_WIDTH"])
def test_typer_help_is_clamped_whatever_variable_sets_its_width(cli, env):
    code, out, err = cli("new", "--help", env=env)
    assert code == 0 and 0 < widest(out) <= MAX_WIDTH


def test_practice_at_a_huge_width(cli):
    code, out, err = cli("practice", "single-head-3x4", input="1 1; 2 2; 2 2\n", env={"COLUMNS": "1000000"})
    assert (code, err) == (0, "") and widest(out) <= MAX_WIDTH


def test_the_process_environment_is_never_changed_by_a_run(cli):
    before = dict(os.environ)
    cli("list", env={"COLUMNS": "1000000"})
    assert dict(os.environ) == before


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_terminal_wider_than_the_maximum_without_columns():
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    for args in (["explain", "single-head-3x4"], ["--help"]):
        child = pexpect.spawn(sys.executable, ["-m", "tutor", *args], env=env, cwd=str(REPO), encoding="utf-8",
                              timeout=120, dimensions=(40, 3000))
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        assert 0 < widest(child.before.replace("\r\n", "\n")) <= MAX_WIDTH


@pytest.mark.parametrize("columns", ["9" * 5000, "0" * 5000 + "30", " 1000000 ", "\u0661\u0660\u0660"],
                         ids=["5000 digits", "5000 leading zeros", "spaces", "Arabic-Indic digits"])
def test_a_width_no_int_can_hold_or_odd_digits_never_crash(cli, columns):
    """``int()`` refuses more than 4,300 digits; ``str.isdigit`` accepts digits int() may not read as the user meant."""
    code, out, err = cli("list", env={"COLUMNS": columns})
    assert (code, err) == (0, "") and 0 < widest(out) <= MAX_WIDTH
