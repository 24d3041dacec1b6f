"""Pin everything a test's output could depend on (home, width, colour, language), and drive the CLI.

Two fixtures run attn-tutor, so that every test drives it the same way:

- ``cli(*argv, input=None, env=None) -> Result``: in this process, through
  :func:`tutor.cli.main` with its standard streams injected (no
  monkeypatching of ``sys.stdin``, no capture of the test's own output).
- ``cli_process(*argv, input=b"", env=None, cwd=REPO, redirect="") ->
  ProcessResult``: a fresh interpreter (``python -m tutor``), for what only a
  real process shows: the real standard streams, their encoding, closed
  descriptors (``redirect=">&-"``, applied by a shell), start-up imports.

Tests that need a terminal (a pseudo-terminal) drive it with pexpect
(``tests/ptys.py``: by what the terminal shows, never by a delay).  A test
that sends SIGINT to a child gives it the default disposition itself
(:func:`default_sigint`): a suite started as a background job has SIGINT
ignored, and children inherit that.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

import pytest

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"


def _v1_bundled() -> list[str]:
    """The bundled exercises of format v1 (no grouped K/V heads, cache or bias): what the backward pass is built for."""
    from tutor.exercise.catalog import resolve

    return [p.stem for p in sorted(EXERCISES.glob("*.yaml")) if not resolve(p.stem).is_v2]


V1_BUNDLED = _v1_bundled()


@pytest.fixture(autouse=True)
def _pinned_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_TUTOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATTN_TUTOR_PATH", raising=False)
    monkeypatch.delenv("ATTN_TUTOR_LANG", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")


class Result(NamedTuple):
    """One run of attn-tutor in this process: its exit code and what it wrote (``code, out, err = ...``)."""

    code: int
    out: str
    err: str


@dataclass(frozen=True)
class ProcessResult:
    """One run of attn-tutor as a process: its exit code and the bytes it wrote (``out``/``err`` decoded)."""

    code: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "backslashreplace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "backslashreplace")


Env = Mapping[str, "str | None"]


@pytest.fixture
def cli(monkeypatch) -> Callable[..., Result]:
    """Run attn-tutor in this process: ``cli(*argv, input=None, env=None) -> Result(code, out, err)``.

    ``input`` is the text on standard input (``None``: empty, the end of
    input at once; or a stream of your own); ``env`` sets variables for this run (``None`` as a value
    removes one), on top of the pinned environment.  The streams are
    passed to :func:`tutor.cli.main`; each is a fresh ``StringIO``.
    """
    from tutor.cli import main

    def run(*argv: object, input: str | TextIO | None = None, env: Env | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as m:
            for name, value in (env or {}).items():
                if value is None:
                    m.delenv(name, raising=False)
                else:
                    m.setenv(name, value)
            stdin = io.StringIO(input or "") if input is None or isinstance(input, str) else input
            code = main([str(a) for a in argv], stdin=stdin, stdout=out, stderr=err)
        return Result(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli_process() -> Callable[..., ProcessResult]:
    """Run attn-tutor as a process: ``cli_process(*argv, input=b"", env=None, cwd=REPO, redirect="", timeout=180)``.

    ``input`` (bytes, or text written as UTF-8) is piped to standard input;
    ``env`` adds to (``None``: removes from) the pinned environment;
    ``redirect`` is a shell redirection applied to the process (``">&-"``
    closes stdout).  A process that outlives ``timeout`` seconds fails the test.
    """

    def run(*argv: object, input: bytes | str = b"", env: Env | None = None, cwd: Path | str = REPO,
            redirect: str = "", timeout: float = 180) -> ProcessResult:
        full = dict(os.environ)
        for name, value in (env or {}).items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        command = [sys.executable, "-m", "tutor", *(str(a) for a in argv)]
        if redirect:
            command = ["sh", "-c", f'exec "$@" {redirect}', "sh", *command]
        data = input.encode("utf-8") if isinstance(input, str) else input
        done = subprocess.run(command, input=data, capture_output=True, env=full, cwd=cwd, timeout=timeout,
                              check=False)
        return ProcessResult(done.returncode, done.stdout, done.stderr)

    return run


def default_sigint() -> None:
    """A ``preexec_fn`` for a child that is sent Ctrl-C: SIGINT's default disposition, as in a shell's foreground job.

    Python then installs its own handler at start-up (Ctrl-C raises
    ``KeyboardInterrupt``).  The child must not inherit the suite's: a
    non-interactive shell starts a background job (``make test &``) with
    SIGINT ignored, and a child inherits that.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignored_sigint() -> None:
    """A ``preexec_fn``: what a non-interactive shell does to a job it starts with ``&``: SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class InterruptedInput(io.StringIO):
    """Answers typed until Ctrl-C: the read after the last line raises ``KeyboardInterrupt`` (a stdin for ``cli``)."""

    def readline(self, *args):
        line = super().readline(*args)
        if not line:
            raise KeyboardInterrupt
        return line
