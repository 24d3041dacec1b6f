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
from enum import Enum
from pathlib import Path
from typing import Annotated

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

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def write(text: str) -> None:
    """Write machine-readable output verbatim (no wrapping, no markup)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


ExerciseArg = Annotated[str, typer.Argument(help="A bundled exercise id or a YAML file path.")]
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
from . import author as _author  # noqa: F401  validate, new, schema
from . import check as _check  # noqa: F401  check
from . import explain as _explain  # noqa: F401  explain, list
from . import practice as _practice  # noqa: F401  practice, stats


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    Typer reports usage errors itself (exit 2); here every :class:`TutorError`
    becomes ``error: ...`` lines on stderr with its exit code (2), never a traceback.
    """
    try:
        app(args=argv, prog_name="attn-tutor")
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
    except BrokenPipeError:  # e.g. `attn-tutor explain ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


def run() -> None:  # pragma: no cover - the console script
    sys.exit(main())
