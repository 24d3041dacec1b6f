"""The command line: a thin Typer layer over the library.

The only module that imports typer.  Commands import what they compute with
inside their bodies, so ``attn-tutor --help`` and ``attn-tutor list`` never
import sympy or numpy.  Every :class:`tutor.errors.TutorError` becomes a
one-line ``error: ...`` on stderr and exit code 2, in :func:`main` only.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated, Optional

import typer

from .errors import TutorError
from .messages import t

app = typer.Typer(
    help=t("cli.help"),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class ExplainFormat(str, Enum):
    rich = "rich"
    json = "json"


class ListFormat(str, Enum):
    rich = "rich"
    json = "json"


def console(stderr: bool = False):  # -> rich.console.Console
    """The console commands print to; width, colour and encoding come from the environment."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def write(text: str) -> None:
    """Write machine-readable output verbatim (no wrapping, no markup)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


ExerciseArg = Annotated[str, typer.Argument(help="A bundled exercise id or a YAML file path.")]


@app.command(help=t("cli.explain.help"))
def explain(
    exercise: ExerciseArg,
    head: Annotated[Optional[int], typer.Option("--head", help=t("cli.opt.head"), min=0)] = None,
    precision: Annotated[int, typer.Option("--precision", help=t("cli.opt.precision"), min=0, max=15)] = 4,
    fmt: Annotated[ExplainFormat, typer.Option("--format", help=t("cli.opt.format"))] = ExplainFormat.rich,
) -> None:
    from .catalog import resolve
    from .exact import solve

    ex = resolve(exercise)
    if head is not None and head >= ex.num_heads:
        raise typer.BadParameter(t("explain.no_head", head=head, last=ex.num_heads - 1), param_hint="--head")
    sol = solve(ex)
    if fmt is ExplainFormat.json:
        from .render.json import dumps

        write(dumps(sol, head))
    else:
        from .render.rich import render

        render(sol, console(), head=head, precision=precision)


@app.command("list", help=t("cli.list.help"))
def list_(
    fmt: Annotated[ListFormat, typer.Option("--format", help=t("cli.opt.format"))] = ListFormat.rich,
) -> None:
    from .catalog import bundled

    exercises = bundled()
    rows = [
        {
            "id": ex.id,
            "title": ex.title,
            "L": ex.L,
            "L_k": ex.L_k,
            "d_model": ex.d_model,
            "heads": ex.num_heads,
            "mask": ex.mask_kind if ex.key_padding is None else (ex.mask_kind + "+padding" if ex.mask_kind != "none" else "padding"),
            "cross": ex.is_cross,
            "difficulty": ex.difficulty,
            "tags": list(ex.tags),
        }
        for ex in exercises
    ]
    if fmt is ListFormat.json:
        import json

        write(json.dumps(rows, indent=1))
        return
    from .render.listing import render_list

    render_list(rows, console())


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
