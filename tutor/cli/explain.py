"""`explain` (with its handouts: Markdown, HTML, SVG, blank worksheets) and `list`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..base.messages import t
from .common import (
    ExerciseArg,
    ExercisesOpt,
    Format,
    FormatOpt,
    check_head,
    console,
    environment,
    folders,
    head_index,
    store_path,
    warn,
    write_document,
    write_json,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from rich.console import Console

    from ..base.env import Env
    from ..steps import Solution

BlankOpt = Annotated[bool, typer.Option("--blank", help=t("cli.opt.blank"))]


def _export_path(value: str) -> Path:
    """``--export``'s value as a path; an empty one is a usage error that says so (``Path("")`` is ``.``, a
    folder: "file '' is a directory" would be the message).  A folder, a FIFO, a device are refused later, by
    :func:`check_export`, with what they are."""
    if not value.strip():
        from ..authoring.validate import EXPORT_SUFFIXES

        raise typer.BadParameter(t("handout.export_empty", choices=", ".join(EXPORT_SUFFIXES)))
    return Path(value)


ExportOpt = Annotated[Path | None, typer.Option("--export", help=t("cli.opt.export"), parser=_export_path,
                                                show_default=False)]
ForceOpt = Annotated[bool, typer.Option("--force", help=t("cli.opt.force_export"))]
BriefOpt = Annotated[bool, typer.Option("--brief", help=t("cli.opt.brief"))]


class ExplainFormat(str, Enum):
    rich = "rich"
    json = "json"
    markdown = "markdown"
    html = "html"


def explain(
    ctx: typer.Context,
    exercise: ExerciseArg,
    head: Annotated[int | None, typer.Option("--head", help=t("cli.opt.head.one_based"), min=1, show_default=False)] = None,
    precision: Annotated[int, typer.Option("--precision", help=t("cli.opt.precision"), min=0, max=15)] = 4,
    fmt: Annotated[ExplainFormat, typer.Option("--format", help=t("cli.opt.format"))] = ExplainFormat.rich,
    exercises: ExercisesOpt = None,
    blank: BlankOpt = False,
    export: ExportOpt = None,
    force: ForceOpt = False,
    backward: Annotated[bool, typer.Option("--backward", help=t("cli.opt.backward"))] = False,
    tiled: Annotated[bool, typer.Option("--tiled", help=t("cli.opt.tiled"))] = False,
    block_size: Annotated[int, typer.Option("--block-size", help=t("cli.opt.block_size"), min=1, max=16)] = 2,
    brief: BriefOpt = False,
) -> None:
    """Print (or ``--export``) the worked solution of an exercise, after the two engines agreed on it.

    A hand-sized exercise (:func:`tutor.steps.hand_sized`) shows the
    arithmetic of every step unless ``--brief``.
    """
    from ..exercise.catalog import resolve
    from ..steps import solve

    env = environment(ctx)
    if export is not None:
        source = ctx.get_parameter_source("fmt")
        check_export(export, fmt.value, explicit=source is not None and source.name != "DEFAULT", force=force,
                     environ=env.environ)

    ex = resolve(exercise, folders(env, exercises))
    check_head(head, ex.num_heads)
    head = head_index(head)  # from here on the 0-based index
    source = ctx.get_parameter_source("block_size")
    if not tiled and source is not None and source.name != "DEFAULT":  # a size for a walk not asked for
        raise typer.BadParameter(t("tiled.practice.block_alone"), param_hint="--block-size")
    if tiled:  # FlashAttention's online softmax, block by block: its own view (issue 13)
        from .tiled import explain_tiled

        if backward or blank or export is not None or fmt not in (ExplainFormat.rich, ExplainFormat.json):
            raise typer.BadParameter(t("tiled.formats"), param_hint="--tiled")
        explain_tiled(env, ex, head=head, block_size=block_size, precision=precision, fmt=fmt.value)
        if fmt is ExplainFormat.rich:
            tiled_options = ["--tiled"] + (["--block-size", str(block_size)] if block_size != 2 else [])
            next_step(console(env), exercise, head=head, options=tiled_options, exercises=exercises or (),
                      sentence="explain.next.tiled")
        return
    sol = solve(ex, backward=backward)
    from ..production.verify import verify

    verify(sol)  # the exact engine and the NumPy core must agree before anything is printed
    if fmt in (ExplainFormat.markdown, ExplainFormat.html) or blank or export is not None:
        handout(env, sol, fmt.value, head=head, precision=precision, blank=blank, export=export, brief=brief,
                force=force)
    elif fmt is ExplainFormat.json:
        from ..render.json import dumps

        write_document(dumps(sol, head))
    else:
        from ..render.rich import render

        out = console(env)
        render(sol, out, head=head, precision=precision, brief=brief)
        next_step(out, exercise, head=head, options=["--backward"] if backward else [], exercises=exercises or ())


def next_step(out: Console, exercise: str, *, head: int | None, options: Sequence[str], exercises: Sequence[Path],
              sentence: str = "explain.next") -> None:
    """The last lines of a worked solution in a terminal: what to do next, the command that does it (the
    same exercise and head, practised step by step, with ``options``: ``--backward``, ``--tiled``).
    Issue 20, E: ``make run`` ended on a table."""
    from rich.text import Text

    from ..render.rich import RichRenderer
    from ..render.text import print_command

    argv = ["attn-tutor", "practice", exercise]
    argv += ["--head", str(head + 1)] if head is not None else []
    argv += options
    for folder in exercises:
        argv += ["--exercises", str(folder)]
    tx = RichRenderer(out).tx  # escaped, and in ASCII on a stream that is not UTF-8
    out.print()
    out.print(Text(tx(t(sentence)), style="bold"))
    print_command(out, [tx(word) for word in argv])


def check_export(export: Path, fmt: str, *, explicit: bool, force: bool, environ: Mapping[str, str] | None = None) -> None:
    """Refuse an ``--export`` that cannot be honoured, before anything is computed.

    Usage errors (exit 2): a suffix that is not one of
    :data:`tutor.authoring.validate.EXPORT_SUFFIXES`, and a ``--format`` given
    explicitly that the export is not (``--export x.html --format json``: the
    suffix decides what is written, so the format would be ignored).
    :class:`TutorError` (exit 2): the file exists and ``force`` is False (as
    ``new -o``), or it exists and is not a regular file (a FIFO would block the
    write; refused even with ``force``); a ``.pdf`` without headless Chromium
    on the ``PATH`` of ``environ``, the run's variables (:func:`tutor.render.pdf.find_chromium`).
    """
    from ..authoring.validate import EXPORT_FORMATS, EXPORT_SUFFIXES
    from ..base.outfile import check_target

    suffix = export.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        check_target(export, force=True)  # /dev/full: said to be a device, before its name is looked at
        raise typer.BadParameter(t("handout.bad_suffix", found=export, choices=", ".join(EXPORT_SUFFIXES)),
                                 param_hint="--export")
    if explicit and fmt not in EXPORT_FORMATS[suffix]:
        kind = t(f"handout.kind.{'html' if suffix == '.htm' else suffix[1:]}")
        raise typer.BadParameter(t("handout.format_clash", path=export, found=fmt, kind=kind,
                                   formats=t("list.sep.or").join(f"--format {f}" for f in EXPORT_FORMATS[suffix])),
                                 param_hint="--format")
    check_target(export, force=force)  # the one rule for every file attn-tutor writes
    if suffix == ".pdf":  # issue 24: printed by headless Chromium; without it, say how to get it before computing
        from ..render.pdf import find_chromium, no_chromium

        if find_chromium(environ or {}) is None:
            raise no_chromium(export)


def handout(env: Env, sol: Solution, fmt: str, *, head: int | None, precision: int, blank: bool,
            export: Path | None, brief: bool = False, force: bool = False) -> None:
    """Print or export ``sol`` as a handout: ``fmt`` is ``rich`` (on a console of ``env``), ``markdown``,
    ``html`` (or ``json``, not blank).

    With ``export`` (checked by :func:`check_export`) the kind of file follows
    its suffix (:func:`tutor.authoring.validate.export_handout`) and nothing is printed
    on stdout; a one-line note goes to stderr.
    """
    if export is not None:
        from ..authoring.validate import export_handout

        export_handout(sol, export, head=head, precision=precision, blank=blank, brief=brief, force=force,
                       environ=env.environ, say=warn)
        warn(t("handout.wrote", path=export))
        return
    if fmt == "json":
        raise typer.BadParameter(t("handout.blank_json"), param_hint="--blank")
    if fmt == "markdown":
        from ..render.markdown import render_markdown

        write_document(render_markdown(sol, head=head, precision=precision, blank=blank, brief=brief))
    elif fmt == "html":
        from ..render.html import export_html

        write_document(export_html(sol, head=head, precision=precision, blank=blank, brief=brief))
    else:
        from ..render.html import renderer

        renderer(console(env), precision, blank, brief=brief).solution(sol, head)


def list_(
    ctx: typer.Context,
    fmt: FormatOpt = Format.rich,
    exercises: ExercisesOpt = None,
) -> None:
    """List the exercises (bundled and packs); each problem of a pack is a ``warning:`` line on stderr."""
    from ..authoring.validate import catalog_rows
    from ..base.errors import StoreError
    from ..exercise.catalog import load_catalog
    from ..store import Store, solved

    env = environment(ctx)
    cat = load_catalog(folders(env, exercises))
    progress: dict[str, frozenset[tuple[str, int | None]]] = {}
    try:  # done / pending marks; list only reads the store, and lists the exercises whatever it holds
        store = Store.open_existing(store_path(env))
        if store is not None:
            with store:
                progress = solved(store)
    except StoreError as err:
        warn(t("validate.warning.text", text=str(err)))
    rows = catalog_rows(cat, progress)
    for p in cat.problems:  # broken pack files and clashing ids: on stderr, the rest is still listed
        warn(t("validate.warning.text", text=str(p)))
    if fmt is Format.json:

        write_json(rows)
        return
    from ..render.catalog import render_catalog

    render_catalog(rows, console(env))
