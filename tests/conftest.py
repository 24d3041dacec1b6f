"""Pin everything a test's output could depend on (home, width, colour, language), and drive the CLI.

Two fixtures run attn-tutor, so that every test drives it the same way:

- ``cli(*argv, input=None, env=None, cwd=None) -> Result``: in this process,
  through :func:`tutor.cli.main` given a :class:`tutor.base.env.Env` built
  from the pinned variables (:func:`pinned_variables`) and its standard
  streams (no monkeypatching of ``sys.stdin`` or of ``os.environ``, no
  capture of the test's own output): attn-tutor in this process never reads
  the process's environment.
- ``cli_encoded(*argv, encoding, input=b"", env=None, cwd=None) -> ProcessResult``:
  the same, on real text streams of one encoding over bytes (what Python makes
  of ``PYTHONIOENCODING``), for what an encoding does to the output.
- ``cli_process(*argv, input=b"", env=None, cwd=REPO, redirect="") ->
  ProcessResult``: a fresh interpreter (``python -m tutor``), for what only a
  real process shows: the real standard streams and how Python makes them,
  closed descriptors (``redirect=">&-"``, applied by a shell), start-up
  imports, signals.  Its environment is this process's with the pinned
  variables.  A process costs about a second of CPU (the imports), so a test
  that needs none of these runs in this process.

Tests that need a terminal (a pseudo-terminal) drive it with pexpect
(``tests/ptys.py``: by what the terminal shows, never by a delay).  A test
that sends SIGINT to a child gives it the default disposition itself
(:func:`default_sigint`): a suite started as a background job has SIGINT
ignored, and children inherit that.

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
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

import pytest

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")  # SGR colour codes
#: What a colour terminal is to rich: any stream taken for a terminal, with 256 colours.
COLOUR_TERMINAL = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "NO_COLOR": None}


def _v1_bundled() -> list[str]:
    """The bundled exercises of format v1 (no grouped K/V heads, cache or bias): what the backward pass is built for
    (the pre-norm block's and MLA's are left out, their backward pass refused: :data:`BLOCK_BUNDLED`,
    :data:`MLA_BUNDLED`; RoPE's, format v3, has its own: tests/test_rope_backward.py)."""
    from tutor.exercise.catalog import resolve

    return [p.stem for p in sorted(EXERCISES.glob("*.yaml")) if not resolve(p.stem).is_v2 and resolve(p.stem).mla is None
            and resolve(p.stem).rope is None and p.stem not in BLOCK_BUNDLED]


def _mla_bundled() -> list[str]:
    """The bundled exercises with multi-head latent attention (format v3): their backward pass is refused."""
    from tutor.exercise.catalog import resolve

    return [p.stem for p in sorted(EXERCISES.glob("*.yaml")) if resolve(p.stem).mla is not None]


def _block_bundled() -> list[str]:
    """The bundled exercises with the pre-norm block (issue 23: a norm or a residual): their backward pass and
    online softmax are refused in one line (tests/test_prenorm_block.py), so the tests of those leave them out."""
    from tutor.exercise.catalog import resolve

    return [p.stem for p in sorted(EXERCISES.glob("*.yaml")) if resolve(p.stem).has_norm or resolve(p.stem).residual]


BLOCK_BUNDLED = _block_bundled()
V1_BUNDLED = _v1_bundled()
MLA_BUNDLED = _mla_bundled()


def pinned_variables(home: Path) -> dict[str, str]:
    """The variables attn-tutor runs under in a test: progress in ``home``, 100 columns, no colour, a dumb
    terminal, the C locale in UTF-8 (and none of :data:`UNPINNED`: English whatever the machine's locale,
    no packs, colour not forced)."""
    return {"ATTN_TUTOR_HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "LANG": "C.UTF-8"}


#: Variables a test's attn-tutor runs without.
UNPINNED = ("ATTN_TUTOR_PATH", "ATTN_TUTOR_LANG", "LC_ALL", "LC_MESSAGES", "FORCE_COLOR")


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


@contextmanager
def _in_folder(monkeypatch, cwd: Path | str | None) -> Iterator[None]:
    """The current folder is ``cwd`` inside the block (``None``: unchanged): a run's relative paths."""
    with monkeypatch.context() as m:
        if cwd is not None:
            m.chdir(cwd)
        yield


@pytest.fixture
def cli(variables, monkeypatch) -> Callable[..., Result]:
    """Run attn-tutor in this process: ``cli(*argv, input=None, env=None, cwd=None) -> Result(code, out, err)``.

    ``input`` is the text on standard input (``None``: empty, the end of
    input at once; or a stream of your own); ``env`` sets variables for this run (``None`` as a value
    removes one), on top of ``variables``; ``cwd`` is the current folder for the run.
    :func:`tutor.cli.main` gets an :class:`tutor.base.env.Env` read from those variables alone (no
    terminal), with the streams; each output is a fresh ``StringIO``.
    """
    from tutor.base.env import Env
    from tutor.cli import main

    def run(*argv: object, input: str | TextIO | None = None, env: Changes | None = None,
            cwd: Path | str | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        stdin = io.StringIO(input or "") if input is None or isinstance(input, str) else input
        changed = with_changes(variables, env)
        with _in_folder(monkeypatch, cwd):
            code = main([str(a) for a in argv], env=Env.from_environ(changed, stdin=stdin, stdout=out, stderr=err))
        return Result(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli_encoded(variables, monkeypatch) -> Callable[..., ProcessResult]:
    """Run attn-tutor in this process on streams of one encoding:
    ``cli_encoded(*argv, encoding, input=b"", env=None, cwd=None) -> ProcessResult`` (the bytes written).

    The streams are the ones Python makes for a process whose standard
    streams are pipes under ``PYTHONIOENCODING=<encoding>``: an
    :class:`io.TextIOWrapper` over bytes each, stdin and stdout ``strict``,
    stderr ``backslashreplace``, no newline translation.  ``input`` (bytes,
    or text written as UTF-8) is what stdin reads; ``env`` and ``cwd`` are
    ``cli``'s.  For what an encoding does to what attn-tutor writes and
    reads; whether Python makes these streams from the variable is for
    ``cli_process`` to show.
    """
    from tutor.base.env import Env
    from tutor.cli import main

    def run(*argv: object, encoding: str, input: bytes | str = b"", env: Changes | None = None,
            cwd: Path | str | None = None) -> ProcessResult:
        data = input.encode("utf-8") if isinstance(input, str) else input
        out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
        stdin = io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors="strict", newline="\n")
        out = io.TextIOWrapper(out_bytes, encoding=encoding, errors="strict", newline="\n", write_through=True)
        err = io.TextIOWrapper(err_bytes, encoding=encoding, errors="backslashreplace", newline="\n",
                               write_through=True)
        changed = with_changes(variables, env)
        try:
            with _in_folder(monkeypatch, cwd):
                code = main([str(a) for a in argv], env=Env.from_environ(changed, stdin=stdin, stdout=out, stderr=err))
        finally:
            for stream in (out, err):
                stream.flush()
                stream.detach()  # the bytes stay readable
        return ProcessResult(code, out_bytes.getvalue(), err_bytes.getvalue())

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


def wrapped(message: str, path: object) -> re.Pattern[str]:
    """``message`` as the console lays it out, to search the output for: a line break (and indent) may
    stand for any space, and ``path`` (a temporary folder's, whose length the test does not choose: longer
    under xdist or with a long TMPDIR) may also be folded between any two of its characters.

    Only the spaces and the folds are free: every character of ``message`` is matched, in order.
    """
    path = str(path)
    start = message.index(path)
    # the unbroken word around the path (quotes, a trailing dot) folds with it
    left = message.rfind(" ", 0, start) + 1
    right = message.find(" ", start + len(path))
    right = len(message) if right < 0 else right

    def spaced(text: str) -> str:
        return r"\s+".join(re.escape(word) for word in text.split(" "))

    def folded(text: str) -> str:
        return r"\s*".join(r"\s+" if c == " " else re.escape(c) for c in text)

    return re.compile(spaced(message[:left]) + folded(message[left:right]) + spaced(message[right:]))


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
