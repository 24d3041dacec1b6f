"""The command line: a thin Typer layer over the library.

The only package that imports typer: ``app`` and :func:`main` here, the
commands in one module per area (``explain``, ``practice``, ``author``).
Commands import what they compute with inside their bodies, so ``attn-tutor --help`` and ``attn-tutor list`` never
import sympy or numpy.  Every :class:`tutor.errors.TutorError` becomes a
one-line ``error: ...`` on stderr and exit code 2, in :func:`main` only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, TextIO

import typer

from ..errors import TutorError
from ..messages import t

app = typer.Typer(
    help=t("cli.help"),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def console(stderr: bool = False):  # -> rich.console.Console
    """The console commands print to; width, colour and encoding come from the environment."""
    from rich.console import Console

    # markup=False: text from exercise files (token labels, titles) is shown as written, never as rich markup
    return Console(stderr=stderr, highlight=False, soft_wrap=False, markup=False)


def write(text: str) -> None:
    """Write machine-readable output verbatim (no wrapping, no markup)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


ExerciseArg = Annotated[str, typer.Argument(help="A bundled exercise id or a YAML file path.")]


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"attn-tutor {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", help=t("cli.opt.version"), callback=_version, is_eager=True)] = False,
) -> None:
    """Options of attn-tutor itself (before the command)."""


def check_head(head: int | None, num_heads: int) -> None:
    """A usage error (exit 2) when ``--head`` names a head the exercise does not have."""
    if head is not None and head >= num_heads:
        key = "explain.one_head" if num_heads == 1 else "explain.no_head"
        raise typer.BadParameter(t(key, head=head, last=num_heads - 1), param_hint="--head")

# Options shared by several commands: defined once.


class Format(str, Enum):
    """`--format` of list, check, stats and validate: for people, or JSON for scripts and CI."""

    rich = "rich"
    json = "json"


FormatOpt = Annotated[Format, typer.Option("--format", help=t("cli.opt.format"))]
ExercisesOpt = Annotated[
    list[Path] | None,
    typer.Option("--exercises", help=t("cli.opt.exercises"), exists=True, file_okay=False, dir_okay=True,
                 show_default=False),
]

# Commands live in one module per area and register themselves on `app`.
# The order of these imports is the order of the commands in `attn-tutor --help`.
# isort: off
from . import explain as _explain  # noqa: F401  explain, list
from . import practice as _practice  # noqa: F401  practice, stats
from . import check as _check  # noqa: F401  check
from . import author as _author  # noqa: F401  validate, new, schema
# isort: on


class OutputError(TutorError):
    """Standard output cannot be written (a full disk, a closed file)."""


class _GuardedStdout:
    """Standard output that survives a reader going away.

    When the reader of a pipe quits (``attn-tutor check … | head -1``), later
    writes are dropped and the command runs to its end, so its exit code
    still says what it found (``check``: 1 when a step is wrong), not what
    happened to the pipe.  Any other write error (``> /dev/full``) becomes one
    ``error:`` line and exit 2.  Either way fd 1 is pointed at /dev/null so
    the interpreter's last flush cannot fail again.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.broken = False

    def _silence(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
            pass

    def _guard(self, call: Callable[[], object]) -> None:
        if self.broken:
            return
        try:
            call()
        except BrokenPipeError:
            self._silence()
        except OSError as err:
            self._silence()
            raise OutputError(t("cli.output_failed", reason=err.strerror or err)) from None

    def write(self, text: str) -> int:
        self._guard(lambda: self._stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def __getattr__(self, name: str) -> object:  # encoding, isatty, fileno, ... as the real stream
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    Typer reports usage errors itself (exit 2); here every :class:`TutorError`
    becomes ``error: ...`` lines on stderr with its exit code (2), never a
    traceback.  Output goes through :class:`_GuardedStdout`.
    """
    real = sys.stdout
    guarded = _GuardedStdout(real) if real is not None else None
    if guarded is not None:
        sys.stdout = guarded  # type: ignore[assignment]
    try:
        try:
            app(args=argv, prog_name="attn-tutor")
        finally:
            if guarded is not None:
                guarded.flush()  # inside the try: a failing last flush is reported like any write
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except TutorError as err:
        for line in str(err).splitlines():
            sys.stderr.write(t("cli.error", message=line) + "\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(t("cli.interrupted") + "\n")
        return 130
    finally:
        sys.stdout = real
    return 0


def run() -> None:  # pragma: no cover - the console script
    sys.exit(main())
