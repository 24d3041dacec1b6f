"""Pin everything a test's output could depend on (home, width, colour, language), and drive the CLI.

Two fixtures run attn-tutor, so that every test drives it the same way:

- ``cli(*argv, input=None, env=None) -> Result``: in this process, through
  :func:`tutor.cli.main` given a :class:`tutor.base.env.Env` built from the
  pinned variables (:func:`pinned_variables`) and its standard streams (no
  monkeypatching of ``sys.stdin`` or of ``os.environ``, no capture of the
  test's own output): attn-tutor in this process never reads the process's
  environment.
- ``cli_process(*argv, input=b"", env=None, cwd=REPO, redirect="") ->
  ProcessResult``: a fresh interpreter (``python -m tutor``), for what only a
  real process shows: the real standard streams, their encoding, closed
  descriptors (``redirect=">&-"``, applied by a shell), start-up imports.
  Its environment is this process's with the pinned variables.

A test module that starts processes of its own (pexpect for a
pseudo-terminal, ``subprocess``) pins the environment they inherit with the
``child_environment`` fixture (``pytestmark``): a process reads its
environment.  ``home`` is the pinned progress store's folder, and
``variables`` the pinned variables (a module overrides the fixture to
change them for its tests).
"""

from __future__ import annotations

import io
import os
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


def pinned_variables(home: Path) -> dict[str, str]:
    """The variables attn-tutor runs under in a test: progress in ``home``, 100 columns, no colour, a dumb
    terminal (and none of :data:`UNPINNED`: English, no packs, colour not forced)."""
    return {"ATTN_TUTOR_HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


#: Variables a test's attn-tutor runs without.
UNPINNED = ("ATTN_TUTOR_PATH", "ATTN_TUTOR_LANG", "FORCE_COLOR")


def with_changes(variables: Mapping[str, str], changes: Mapping[str, str | None] | None) -> dict[str, str]:
    """``variables`` with ``changes`` made (``None`` as a value removes one)."""
    out = dict(variables)
    for name, value in (changes or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


@pytest.fixture
def home(tmp_path) -> Path:
    """The folder of a test's progress store (``ATTN_TUTOR_HOME`` of ``cli`` and ``cli_process``)."""
    return tmp_path / "home"


@pytest.fixture
def variables(home) -> dict[str, str]:
    """The variables attn-tutor runs under in a test (``cli``'s Env, ``cli_process``'s environment, a
    ``child_environment``): :func:`pinned_variables`.  A module overrides this fixture to change them
    for all its tests (``return {**variables, "COLUMNS": "400"}``)."""
    return pinned_variables(home)


@pytest.fixture
def child_environment(variables, monkeypatch):
    """Pin this process's environment to ``variables`` for what reads it: the processes a test starts
    itself (pexpect, subprocess), and the helpers that find the pinned store through it
    (``test_practice_cli.store_path``).  attn-tutor run by ``cli`` never reads it."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    for name in UNPINNED:
        monkeypatch.delenv(name, raising=False)


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


Changes = Mapping[str, "str | None"]


@pytest.fixture
def cli(variables) -> Callable[..., Result]:
    """Run attn-tutor in this process: ``cli(*argv, input=None, env=None) -> Result(code, out, err)``.

    ``input`` is the text on standard input (``None``: empty, the end of
    input at once; or a stream of your own); ``env`` sets variables for this run (``None`` as a value
    removes one), on top of ``variables``.  :func:`tutor.cli.main` gets an
    :class:`tutor.base.env.Env` read from those variables alone (no terminal), with the
    streams; each output is a fresh ``StringIO``.
    """
    from tutor.base.env import Env
    from tutor.cli import main

    def run(*argv: object, input: str | TextIO | None = None, env: Changes | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        stdin = io.StringIO(input or "") if input is None or isinstance(input, str) else input
        changed = with_changes(variables, env)
        code = main([str(a) for a in argv], env=Env.from_environ(changed, stdin=stdin, stdout=out, stderr=err))
        return Result(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli_process(variables) -> Callable[..., ProcessResult]:
    """Run attn-tutor as a process: ``cli_process(*argv, input=b"", env=None, cwd=REPO, redirect="", timeout=180)``.

    ``input`` (bytes, or text written as UTF-8) is piped to standard input;
    the process's environment is this one's with ``variables``, and
    ``env`` adds to (``None``: removes from) them;
    ``redirect`` is a shell redirection applied to the process (``">&-"``
    closes stdout).  A process that outlives ``timeout`` seconds fails the test.
    """

    def run(*argv: object, input: bytes | str = b"", env: Changes | None = None, cwd: Path | str = REPO,
            redirect: str = "", timeout: float = 180) -> ProcessResult:
        inherited = {name: value for name, value in os.environ.items() if name not in UNPINNED}
        full = with_changes({**inherited, **variables}, env)
        command = [sys.executable, "-m", "tutor", *(str(a) for a in argv)]
        if redirect:
            command = ["sh", "-c", f'exec "$@" {redirect}', "sh", *command]
        data = input.encode("utf-8") if isinstance(input, str) else input
        done = subprocess.run(command, input=data, capture_output=True, env=full, cwd=cwd, timeout=timeout,
                              check=False)
        return ProcessResult(done.returncode, done.stdout, done.stderr)

    return run


class InterruptedInput(io.StringIO):
    """Answers typed until Ctrl-C: the read after the last line raises ``KeyboardInterrupt`` (a stdin for ``cli``)."""

    def readline(self, *args):
        line = super().readline(*args)
        if not line:
            raise KeyboardInterrupt
        return line
