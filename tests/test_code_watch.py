"""``code check --watch``: checked again when the file is saved, a summary on Ctrl-C (issue 21, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.katas.watch import watch_file

from .ptys import default_sigint, spawn

REPO = Path(__file__).resolve().parent.parent
SOLUTION = REPO / "tutor" / "katas" / "files" / "mha" / "numpy_solution.py"


def test_a_change_is_checked_once_it_holds_still(tmp_path) -> None:
    f = tmp_path / "mine.py"
    f.write_text("a")
    looks: list[str] = []
    checked: list[str] = []
    results = iter([False, True])

    def sleep(_: float) -> None:  # the editor saves between the watch's looks
        looks.append("look")
        if len(looks) == 2:
            f.write_text("ab")  # a save, seen at the next look ...
        if len(looks) == 3:
            f.write_text("abc")  # ... and another before it held still: the half-written "ab" is never run

    def check() -> bool:
        checked.append(f.read_text())
        return next(results)

    summary = watch_file(f, check, sleep=sleep, stop=lambda checks: checks == 2)
    assert (summary.checks, summary.passes, summary.last) == (2, 1, True)
    assert checked == ["a", "abc"]


def test_a_ctrl_c_as_soon_as_the_watch_waits_finds_the_check_counted(tmp_path) -> None:
    """The CI failure of stop 29: the second check had said PASS and "waiting for", and a Ctrl-C that
    came before the count went up gave "1 check, 0 passed".  ``waiting`` is said after the count."""
    f = tmp_path / "mine.py"
    f.write_text("a")
    said: list[str] = []
    results = iter([False, True])

    def sleep(_: float) -> None:
        if f.read_text() == "a":
            f.write_text("ab")  # a save after the first check

    def waiting() -> None:
        said.append("waiting")
        if len(said) == 2:
            raise KeyboardInterrupt  # Ctrl-C the moment the second "waiting for" shows

    summary = watch_file(f, lambda: next(results), waiting=waiting, sleep=sleep)
    assert said == ["waiting", "waiting"]
    assert (summary.checks, summary.passes, summary.last) == (2, 1, True)


def test_a_check_that_ctrl_c_interrupts_is_not_counted(tmp_path) -> None:
    f = tmp_path / "mine.py"
    f.write_text("a")

    def check() -> bool:
        raise KeyboardInterrupt

    said: list[str] = []
    summary = watch_file(f, check, waiting=lambda: said.append("waiting"))
    assert (summary.checks, summary.passes, summary.last, said) == (0, 0, False, [])


def test_ctrl_c_ends_the_watch_with_its_summary(tmp_path) -> None:
    f = tmp_path / "mha.py"
    f.write_text(SOLUTION.read_text().replace("/ math.sqrt(d_k)", ""))
    child = spawn("code", "check", str(f), "--watch", preexec_fn=default_sigint,
                  ATTN_TUTOR_HOME=str(tmp_path / "home"))
    child.expect("mistake: the scores are not scaled")
    child.expect("waiting for")
    f.write_text(SOLUTION.read_text())
    child.expect("PASS: all")
    child.expect("waiting for")
    child.sendintr()
    child.expect("watch ended: 2 checks, 1 passed; the last one passed")
    child.expect(pytest.importorskip("pexpect").EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_before_any_check_finished_speaks_of_no_last_check(tmp_path) -> None:
    """The first check is still importing the file (it sleeps) when Ctrl-C comes: no "the last one did not pass"."""
    f = tmp_path / "mha.py"
    f.write_text("import time\nKATA = 'mha'\ntime.sleep(600)\n")
    child = spawn("code", "check", str(f), "--watch", preexec_fn=default_sigint,
                  ATTN_TUTOR_HOME=str(tmp_path / "home"))
    child.expect("checking")
    child.sendintr()
    child.expect("watch ended before any check finished: no check ran")
    child.expect(pytest.importorskip("pexpect").EOF)
    child.close()
    assert child.exitstatus == 0
    assert "last one" not in (child.before or "")
