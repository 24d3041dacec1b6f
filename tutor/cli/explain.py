"""`explain` and `list`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..messages import t
from . import ExerciseArg, ExercisesOpt, Format, FormatOpt, app, check_head, console, write_document

BlankOpt = Annotated[bool, typer.Option("--blank", help=t("cli.opt.blank"))]
ExportOpt = Annotated[Path | None, typer.Option("--export", help=t("cli.opt.export"), dir_okay=False, show_default=False)]
ForceOpt = Annotated[bool, typer.Option("--force", help=t("cli.opt.force_export"))]


class ExplainFormat(str, Enum):
    rich = "rich"
    json = "json"
    markdown = "markdown"
    html = "html"



@app.command(help=t("cli.explain.help"))
def explain(
    ctx: typer.Context,
    exercise: ExerciseArg,
    head: Annotated[int | None, typer.Option("--head", help=t("cli.opt.head"), min=0)] = None,
    precision: Annotated[int, typer.Option("--precision", help=t("cli.opt.precision"), min=0, max=15)] = 4,
    fmt: Annotated[ExplainFormat, typer.Option("--format", help=t("cli.opt.format"))] = ExplainFormat.rich,
    exercises: ExercisesOpt = None,
    blank: BlankOpt = False,
    export: ExportOpt = None,
    force: ForceOpt = False,
) -> None:
    from ..catalog import resolve
    from ..steps import solve

    if export is not None:
        from .author import check_export

        source = ctx.get_parameter_source("fmt")
        check_export(export, fmt.value, explicit=source is not None and source.name != "DEFAULT", force=force)

    ex = resolve(exercise, exercises or ())
    check_head(head, ex.num_heads)
    sol = solve(ex)
    from ..verify import verify

    verify(sol)  # the exact engine and the NumPy core must agree before anything is printed
    if fmt in (ExplainFormat.markdown, ExplainFormat.html) or blank or export is not None:
        from .author import handout

        handout(sol, fmt.value, head=head, precision=precision, blank=blank, export=export)
    elif fmt is ExplainFormat.json:
        from ..render.json import dumps

        write_document(dumps(sol, head))
    else:
        from ..render.rich import render

        render(sol, console(), head=head, precision=precision)


@app.command("list", help=t("cli.list.help"))
def list_(
    fmt: FormatOpt = Format.rich,
    exercises: ExercisesOpt = None,
) -> None:
    from ..catalog import load_catalog
    from .author import catalog_rows, report_catalog_problems

    cat = load_catalog(exercises or ())
    rows = catalog_rows(cat)
    report_catalog_problems(cat)  # broken pack files and clashing ids: on stderr, the rest is still listed
    if fmt is Format.json:
        import json

        write_document(json.dumps(rows, indent=1))
        return
    from ..render.catalog import render_catalog

    render_catalog(rows, console())
