"""What every command shares: output helpers, shared options, exit codes.

The command modules (``explain``, ``practice``, ``check``, ``author``) import
from here and never from :mod:`tutor.cli` itself, which imports them to
register their functions on the Typer app: dependencies point one way,
``tutor.cli -> command modules -> common``.  Nothing here imports sympy or
numpy (``attn-tutor --help`` and ``list`` must stay fast).
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from ..base.messages import t
from ..base.textsafe import shown

if TYPE_CHECKING:
    from ..render.console import SafeConsole

#: Exit codes.  1 is the verdict "the solution is wrong" of ``check`` and
#: nothing else: it is returned only for :class:`SolutionWrong`, and every
#: other way out that would give 1 (an uncaught exception, ``sys.exit(1)``,
#: a click abort) is mapped to 2 or 3 by :func:`tutor.cli.main`.
EXIT_OK, EXIT_WRONG, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
#: Ctrl-C ended the command (128 + SIGINT, as a shell reports it); a practice session ends with 0.
EXIT_INTERRUPTED = 130

#: The largest ``--seed`` (a signed 64-bit integer, 19 digits): a larger one is a usage error of ``--seed``
#: itself, never a file's id too long to write (issue 20, E: a 4,001-digit seed was blamed on ``--id``).
MAX_SEED = 2**63 - 1


class SolutionWrong(Exception):
    """Raised by ``check`` (only) when the solution it audited is wrong: exit code 1.

    Neither a :class:`tutor.base.errors.TutorError` (exit 2) nor a ``SystemExit``:
    :func:`tutor.cli.main` is the one place that turns it into :data:`EXIT_WRONG`.
    """


# --- output ------------------------------------------------------------------------------


def console(stderr: bool = False) -> SafeConsole:
    """The console commands print to; colour and encoding come from the environment.

    Its width is the terminal's (or ``COLUMNS``), never under
    :data:`tutor.render.MIN_WIDTH`; markup is off (text from exercise files,
    token labels and titles, is shown as written, never as rich markup); the
    text it renders never holds a raw control character.
    """
    from ..render.console import make_console

    return make_console(stderr=stderr)


def write(text: str) -> None:
    """Write lines for people on stdout verbatim (no wrapping, no markup), control characters escaped."""
    sys.stdout.write(shown(text if text.endswith("\n") else text + "\n", keep="\n\t"))


def write_document(text: str) -> None:
    """Write a machine-readable document (JSON, Markdown, HTML, YAML) on stdout.

    Control characters are escaped (a document is text: newlines and tabs
    stay).  On a stream that is not UTF-8 (``PYTHONIOENCODING=ascii``,
    ``LC_ALL=C``) the document is written as UTF-8 bytes, as a file of that
    format is read; JSON is ASCII anyway.
    """
    text = shown(text if text.endswith("\n") else text + "\n", keep="\n\t")
    document = getattr(sys.stdout, "write_document", None)  # the guarded stdout of main(); a test's capture has none
    if document is not None:
        document(text)
    else:
        sys.stdout.write(text)


def warn(text: str) -> None:
    """Write ``text`` on stderr, one line per line, control characters escaped (a file name may hold any)."""
    for line in text.split("\n"):
        sys.stderr.write(shown(line, keep="\t") + "\n")


# --- input -------------------------------------------------------------------------------


def stdin(ctx: typer.Context) -> TextIO | None:
    """The standard input of this run: the stream :func:`tutor.cli.main` was given, else ``sys.stdin``.

    ``None`` when it is closed (``<&-``); the command decides what that means.
    """
    given = ctx.find_object(Streams)
    return given.stdin if given is not None else sys.stdin


class Streams:
    """The input streams :func:`tutor.cli.main` hands down to the commands (as the click context's object).

    Output needs no such path: ``main`` installs its guarded stdout and
    stderr as ``sys.stdout``/``sys.stderr`` for the run, since typer, click
    and rich write there.
    """

    def __init__(self, stdin: TextIO | None):
        self.stdin = stdin


# --- options shared by several commands: defined once -------------------------------------


class Format(str, Enum):
    """`--format` of list, check, stats and validate: for people, or JSON for scripts and CI."""

    rich = "rich"
    json = "json"


ExerciseArg = Annotated[str, typer.Argument(help=t("cli.opt.exercise"))]
FormatOpt = Annotated[Format, typer.Option("--format", help=t("cli.opt.format"))]
ExercisesOpt = Annotated[
    list[Path] | None,
    typer.Option("--exercises", help=t("cli.opt.exercises"), exists=True, file_okay=False, dir_okay=True,
                 show_default=False),
]


#: ``--head N``: heads are numbered from 1 wherever a learner reads or types them (JSON keeps 0-based indices).
HeadOpt = Annotated[int | None, typer.Option("--head", help=t("cli.practice.head.one_based"), min=1, show_default=False)]
#: ``--tolerance T`` of practice and check: every decimal judged within ± T instead of its rounding.
ToleranceOpt = Annotated[float | None, typer.Option("--tolerance", help=t("cli.practice.tolerance"), show_default=False)]


def head_index(head: int | None) -> int | None:
    """``--head`` (1-based, as a learner counts heads) as the 0-based index the library uses."""
    return None if head is None else head - 1


def check_head(head: int | None, num_heads: int) -> None:
    """A usage error (exit 2) when ``--head`` (1-based) names a head the exercise does not have."""
    if head is not None and head > num_heads:
        from ..practice.plan import head_error

        raise typer.BadParameter(head_error(head - 1, num_heads), param_hint="--head")


def check_tolerance(tolerance: float | None) -> None:
    """A usage error for a ``--tolerance`` that is not a number above 0 (and at most 1000000)."""
    if tolerance is not None and not 0 < tolerance <= 1e6:  # also refuses nan
        raise typer.BadParameter(t("practice.bad_tolerance", found=tolerance), param_hint="--tolerance")
