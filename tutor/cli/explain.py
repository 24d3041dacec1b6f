"""`explain` and `list`."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ..messages import t
from . import ExerciseArg, app, console, write


class ExplainFormat(str, Enum):
    rich = "rich"
    json = "json"


class ListFormat(str, Enum):
    rich = "rich"
    json = "json"


@app.command(help=t("cli.explain.help"))
def explain(
    exercise: ExerciseArg,
    head: Annotated[int | None, typer.Option("--head", help=t("cli.opt.head"), min=0)] = None,
    precision: Annotated[int, typer.Option("--precision", help=t("cli.opt.precision"), min=0, max=15)] = 4,
    fmt: Annotated[ExplainFormat, typer.Option("--format", help=t("cli.opt.format"))] = ExplainFormat.rich,
) -> None:
    from ..catalog import resolve
    from ..exact import solve

    ex = resolve(exercise)
    if head is not None and head >= ex.num_heads:
        raise typer.BadParameter(t("explain.no_head", head=head, last=ex.num_heads - 1), param_hint="--head")
    sol = solve(ex)
    from ..verify import verify

    verify(sol)  # the exact engine and the NumPy core must agree before anything is printed
    if fmt is ExplainFormat.json:
        from ..render.json import dumps

        write(dumps(sol, head))
    else:
        from ..render.rich import render

        render(sol, console(), head=head, precision=precision)


@app.command("list", help=t("cli.list.help"))
def list_(
    fmt: Annotated[ListFormat, typer.Option("--format", help=t("cli.opt.format"))] = ListFormat.rich,
) -> None:
    from ..catalog import bundled

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
    from ..render.listing import render_list

    render_list(rows, console())
