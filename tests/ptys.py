"""Driving attn-tutor in a pseudo-terminal (pexpect) by what the terminal shows, never by a delay.

A prompt on the screen is not yet a terminal that reads: ``attn-tutor`` prints
its prompt, then ``input()`` hands the terminal to readline, which switches it
from the line discipline's cooked mode to its own (no ``ICANON``, no ``ECHO``).
A key sent in between is taken by the line discipline instead: a Ctrl-D there
is lost (readline then reads a NUL byte), a line is echoed twice.  On an idle
machine the gap is microseconds; under load it is long enough to fail a test.
So before typing, a test waits for the terminal state itself: the prompt, and
then the pseudo-terminal in readline's mode (:func:`reading`).

A Ctrl-C needs one state more.  CPython's readline switches the terminal to
its mode, then blocks in ``select()`` and checks for signals only when that
call is interrupted; a SIGINT that lands between the two (microseconds when
idle, long under load) trips the flag but interrupts nothing, and the child
waits for a key that never comes.  So :func:`reading` also waits, where
``/proc`` tells, until the child sleeps in that ``select()``.

And a child that is sent Ctrl-C gets SIGINT's default disposition from the
test (``conftest.default_sigint``), not from whoever started the suite: a
non-interactive shell starts a background job (``make test &``) with SIGINT
ignored, and that is inherited.
"""

from __future__ import annotations

import os
import sys
import termios
import time
from pathlib import Path

import pytest

from .conftest import REPO, default_sigint, ignored_sigint

__all__ = ["answer", "at_prompt", "default_sigint", "ignored_sigint", "reading", "spawn"]

pexpect = pytest.importorskip("pexpect")

EXE = REPO / ".venv" / "bin" / "attn-tutor"


def spawn(*argv: str, preexec_fn=default_sigint, dimensions: tuple[int, int] = (40, 100), timeout: float = 60,
          **env: str):
    """``attn-tutor ARGV`` in a pseudo-terminal of ``dimensions`` (rows, columns), its own width (no COLUMNS)."""
    exe = str(EXE) if EXE.exists() else sys.executable
    args = list(argv) if EXE.exists() else ["-m", "tutor", *argv]
    full = {**os.environ, "TERM": "xterm-256color", **env}
    full.pop("COLUMNS", None)  # the terminal's own size
    return pexpect.spawn(exe, args, env=full, cwd=str(REPO), encoding="utf-8", timeout=timeout,
                         dimensions=dimensions, preexec_fn=preexec_fn)


def reading(child) -> None:
    """Wait until the pseudo-terminal is in readline's mode (``ICANON`` off): the child reads a key now.

    The terminal's mode is polled (``tcgetattr`` on the controlling side
    reports the child's side); the wait ends on that state, on the child's
    exit, or fails after the child's ``timeout``.
    """
    deadline = time.monotonic() + child.timeout
    while termios.tcgetattr(child.child_fd)[3] & termios.ICANON or not _waits_for_input(child.pid):
        if not child.isalive():
            raise AssertionError(f"the child ended before it read its input: {child.before!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the terminal never left cooked mode (no input() under way): {child.before!r}")
        time.sleep(0.005)


def _waits_for_input(pid: int) -> bool:
    """Whether process ``pid`` sleeps in the kernel's ``select``/``poll`` (where readline waits for a key), as
    Linux's ``/proc/PID/wchan`` says; ``True`` where that cannot be told (no ``/proc``, or a kernel that
    hides the name: the terminal's mode is then all a test goes by)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except (OSError, IndexError):
        return True
    if state != "S":  # running, or stopped: not (yet) waiting
        return False
    return wchan in ("", "0") or "poll" in wchan or "select" in wchan


def at_prompt(child, prompt: str) -> None:
    """Wait for ``prompt`` on the screen and for the terminal to read the next key."""
    child.expect_exact(prompt)
    reading(child)


def answer(child, prompt: str, line: str) -> None:
    """Type ``line`` (and Enter) at ``prompt``, once the terminal reads."""
    at_prompt(child, prompt)
    child.sendline(line)
