"""`validate`, `new`, `schema` (issue 5), `handouts` (issue 24): the commands for instructors.

``validate`` reports every problem of every exercise file (exit 0 when all
are valid, 2 otherwise; ``--format json`` for a pack's CI), ``new`` writes a
commented exercise whose numbers are small enough for paper, ``schema``
prints the JSON Schema the loader's model produces.  What they compute lives
in :mod:`tutor.authoring.validate` and :mod:`tutor.authoring.generate`; here options are parsed
and results printed.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..authoring.variants import ID_COLUMNS, NAME_COLUMNS
from ..base.messages import language, t
from .common import (
    MAX_SEED,
    ExercisesOpt,
    Format,
    FormatOpt,
    environment,
    folders,
    warn,
    write,
    write_document,
    write_json,
)


class RopeChoice(str, Enum):
    """`new --rope`: RoPE's pairing (format v3)."""

    interleaved = "interleaved"
    half = "half"


class NormChoice(str, Enum):
    """`new --norm` (issue 23: the pre-norm block)."""

    rmsnorm = "rmsnorm"
    layernorm = "layernorm"


class PlacementChoice(str, Enum):
    """`new --norm-placement` (issue 23): the norm before the projections (pre) or of X + output (post)."""

    pre = "pre"
    post = "post"


class MaskChoice(str, Enum):
    """`new --mask`."""

    none = "none"
    causal = "causal"
    padding = "padding"
    causal_lower_right = "causal_lower_right"  # format v2: with --cache (a decode step) or --cross


# --- validate ------------------------------------------------------------------------


def validate(
    paths: Annotated[list[Path], typer.Argument(help=t("cli.validate.paths"), show_default=False)],
    fmt: FormatOpt = Format.rich,
    notes: Annotated[bool, typer.Option("--notes/--no-notes", help=t("cli.validate.notes"))] = True,
) -> None:
    """Validate files and folders; exit 0 when all are valid, 2 otherwise (notes never change it)."""
    from ..authoring.validate import validate as validate_files

    report = validate_files(paths, notes=notes)
    if fmt is Format.json:
        # ASCII (non-ASCII and control characters as \u escapes): safe on any stream
        write_json(report.document())
    else:
        for line in report.lines():
            write(line)
        warn(report.summary())
    raise typer.Exit(0 if report.ok else 2)


# --- new -----------------------------------------------------------------------------


#: The options that give ``new`` a shape; ``--like`` takes the shape from an exercise instead.
SHAPE_OPTIONS = ("tokens", "d_model", "heads", "d_k", "mask", "cross", "difficulty", "kv_heads", "cache", "alibi", "rope",
                 "norm", "residual", "window", "sinks", "norm_placement", "mla")


def new(
    ctx: typer.Context,
    tokens: Annotated[int, typer.Option("--tokens", help=t("cli.new.tokens"), min=1, max=16)] = 3,
    d_model: Annotated[int, typer.Option("--d-model", help=t("cli.new.d_model"), min=1, max=32)] = 4,
    heads: Annotated[int, typer.Option("--heads", help=t("cli.new.heads"), min=1, max=8)] = 1,
    d_k: Annotated[int, typer.Option("--d-k", help=t("cli.new.d_k"), min=1, max=32)] = 2,
    mask: Annotated[MaskChoice, typer.Option("--mask", help=t("cli.new.mask"))] = MaskChoice.none,
    cross: Annotated[int | None, typer.Option("--cross", help=t("cli.new.cross"), min=1, max=16, show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=t("cli.new.seed"), min=0, max=MAX_SEED, show_default=False)] = None,
    difficulty: Annotated[int | None, typer.Option("--difficulty", help=t("cli.new.difficulty"), min=1, max=5,
                                                   show_default=False)] = None,
    exercise_id: Annotated[str | None, typer.Option("--id", help=t("cli.new.id"), show_default=False)] = None,
    title: Annotated[str | None, typer.Option("--title", help=t("cli.new.title"), show_default=False)] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help=t("cli.new.output"), show_default=False,
                                                dir_okay=False)] = None,
    force: Annotated[bool, typer.Option("--force", help=t("cli.new.force"))] = False,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help=t("cli.new.kv_heads"), min=1, max=8,
                                                 show_default=False)] = None,
    cache: Annotated[int | None, typer.Option("--cache", help=t("cli.new.cache"), min=1, max=15, show_default=False)] = None,
    alibi: Annotated[bool, typer.Option("--alibi", help=t("cli.new.alibi"))] = False,
    rope: Annotated[RopeChoice | None, typer.Option("--rope", help=t("cli.new.rope"), show_default=False)] = None,
    norm: Annotated[NormChoice | None, typer.Option("--norm", help=t("cli.new.norm"), show_default=False)] = None,
    residual: Annotated[bool, typer.Option("--residual", help=t("cli.new.residual"))] = False,
    norm_placement: Annotated[PlacementChoice | None, typer.Option("--norm-placement", help=t("cli.new.norm_placement"),
                                                                   show_default=False)] = None,
    mla: Annotated[int | None, typer.Option("--mla", help=t("cli.new.mla"), min=1, max=2, show_default=False)] = None,
    window: Annotated[int | None, typer.Option("--window", help=t("cli.new.window"), min=1, max=16, show_default=False)] = None,
    sinks: Annotated[int | None, typer.Option("--sinks", help=t("cli.new.sinks"), min=1, max=16, show_default=False)] = None,
    like: Annotated[str | None, typer.Option("--like", help=t("cli.new.like"), show_default=False)] = None,
    allow_dull: Annotated[bool, typer.Option("--allow-dull", help=t("cli.new.allow_dull"))] = False,
    exercises: ExercisesOpt = None,
    student: Annotated[str | None, typer.Option("--student", help=t("cli.new.student"), show_default=False)] = None,
) -> None:
    """Write a generated exercise to ``-o FILE`` (never over an existing one without ``--force``) or stdout.

    With ``--like ID`` the shape (tokens, sizes, heads, mask, biases, W_O) is
    that of exercise ID and only the numbers are new.  The core mistakes the
    result cannot catch (the shape's doing: d_k = 1, d_k = d_model) are noted
    on stderr.
    """
    from ..authoring.generate import Spec, generate
    from ..authoring.validate import mistake_notes, note_text, write_exercise
    from ..base.errors import TutorError
    from ..exercise import validate_text

    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big") % 1_000_000
    if exercise_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", exercise_id):
        raise typer.BadParameter(t("new.bad_id", found=exercise_id), param_hint="--id")
    if exercise_id is not None:
        from ..exercise.catalog import bundled_ids

        if exercise_id in bundled_ids():  # reserved: the new file would shadow it wherever it is read by path
            raise typer.BadParameter(t("new.reserved_id", id=exercise_id, file=f"bundled:{bundled_ids()[exercise_id].name}"),
                                     param_hint="--id")
    if title is not None:
        _check_title(title)
    if student is not None:  # a per-student variant's title (handouts): with --like only, instead of --title
        _check_title(student, "--student")
        if like is None or title is not None:
            raise typer.BadParameter(t("new.student_needs_like"), param_hint="--student")
    if like is not None:
        given = [name for name in SHAPE_OPTIONS if _given(ctx, name)]
        if given:
            raise typer.BadParameter(t("new.like_and_shape", options=", ".join(
                "--" + name.replace("_", "-") for name in given)), param_hint="--like")
        import shlex

        from ..authoring.generate import like as draw_like
        from ..exercise.catalog import resolve

        source = " ".join(shlex.quote(str(a)) for a in [like, *(f"--exercises={d}" for d in exercises or ())])
        text = draw_like(resolve(like, folders(environment(ctx), exercises)), seed, allow_dull=allow_dull,
                         id=exercise_id, title=title, source=source, student=student)
    else:
        if cache and not _given(ctx, "mask"):  # a decode step: each new token sees the cache and the new tokens up to it
            mask = MaskChoice.causal_lower_right
        elif window is not None and not _given(ctx, "mask"):  # a sliding window is causal: drawn as such
            mask = MaskChoice.causal
        spec = Spec(tokens=tokens, d_model=d_model, heads=heads, d_k=d_k, mask=mask.value, cross=cross, seed=seed,
                    difficulty=difficulty, id=exercise_id, title=title, allow_dull=allow_dull, kv_heads=kv_heads,
                    cache=cache, alibi=alibi, rope=None if rope is None else rope.value,
                    norm=None if norm is None else norm.value, residual=residual, window=window, sinks=sinks,
                    norm_placement=None if norm_placement is None else norm_placement.value, mla=mla)
        if heads * d_k > 32:
            raise typer.BadParameter(t("new.too_wide", heads=heads, d_k=d_k, product=heads * d_k), param_hint="--heads/--d-k")
        if mask is MaskChoice.padding and (cross or tokens) + (cache or 0) < 2:
            raise typer.BadParameter(t("new.padding_keys"), param_hint="--mask")
        try:  # format v2: --kv-heads, --cache, --mask causal_lower_right, --alibi
            spec.check_v2()
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint=getattr(err, "option", "--kv-heads/--cache/--mask/--alibi/--rope/--norm")) from None
        text = generate(spec)
    checked = validate_text(text, "<new>")  # nothing is written until it is valid
    if not checked.ok:  # --id or --title may be invalid; the generator's own numbers always are valid
        for p in checked.problems:
            if p.field in ("id", "title"):
                raise typer.BadParameter(str(p.message), param_hint=f"--{p.field}")
        raise TutorError("\n".join(str(p) for p in checked.problems))
    assert checked.exercise is not None
    for w in checked.warnings:  # a valid exercise that no model runs: causal cross-attention
        warn(t("new.warning", message=w.message, hint=w.hint))
    if output is None:
        write_document(text)
    else:
        write_exercise(text, output, force=force)
        warn(t("new.wrote", path=output, id=checked.exercise.id))
    for _, note in mistake_notes(checked.exercise, str(output or "<new>")):
        warn(note_text(note))


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (or by the environment), not left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _check_title(title: str, option: str = "--title") -> None:
    """A usage error for a ``--title`` with a character a terminal acts on or hides (ESC, NUL, U+202E,
    U+200B: :func:`tutor.base.textsafe.is_unsafe`), or a byte the locale could not decode: it would be
    written into the file as it is.

    Whitespace is fine, line breaks included (``\\n``, U+2028, U+0085): the title is written on one
    line, whitespace collapsed to single spaces.
    """
    from ..base.textsafe import is_unsafe
    from ..exercise.yamlread import codepoint

    for ch in title:
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte the locale could not decode, kept by surrogateescape
            raise typer.BadParameter(t("new.bad_title.byte", byte=f"0x{ord(ch) - 0xDC00:02X}"), param_hint=option)
        if is_unsafe(ch) and not ch.isspace():
            raise typer.BadParameter(t("new.bad_title", char=codepoint(ch)), param_hint=option)


# --- schema --------------------------------------------------------------------------


def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from ..exercise import json_schema

    write_json(json_schema())


# --- handouts (issue 24, item 3: per-student variants) ----------------------------------------------


def _listed(headers: tuple[str, ...]) -> str:
    """Headers as a list in a sentence of the run's language (``list.sep``: ``, `` or ``、``); called in the
    options' annotations, which are read when the command is built, in the run's language.  The Chinese
    headers (学号, 姓名) are listed in the Chinese help only: an English help shows no Chinese (they are still
    read, last of all)."""
    shown = headers if language() == "zh" else tuple(h for h in headers if h.isascii())
    return t("list.sep").join(shown)


class WorksheetChoice(str, Enum):
    """`handouts --worksheet`: what ``explain --blank --export`` writes, as Markdown or HTML."""

    markdown = "markdown"
    html = "html"


def handouts(
    ctx: typer.Context,
    like: Annotated[str, typer.Option("--like", help=t("cli.handouts.like"), show_default=False)],
    students: Annotated[Path, typer.Option(
        "--students", help=t("cli.handouts.students", columns=_listed(ID_COLUMNS), names=_listed(NAME_COLUMNS)),
        show_default=False, dir_okay=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help=t("cli.handouts.output"), show_default=False)],
    column: Annotated[str | None, typer.Option(
        "--column", help=t("cli.handouts.column", columns=_listed(ID_COLUMNS)), show_default=False)] = None,
    name_column: Annotated[str | None, typer.Option(
        "--name-column", help=t("cli.handouts.name_column", names=_listed(NAME_COLUMNS)), show_default=False)] = None,
    worksheet: Annotated[WorksheetChoice, typer.Option("--worksheet", help=t("cli.handouts.worksheet"))] = WorksheetChoice.markdown,
    force: Annotated[bool, typer.Option("--force", help=t("cli.handouts.force"))] = False,
    exercises: ExercisesOpt = None,
) -> None:
    """Write a variant of exercise ``--like`` per student of ``--students`` into ``-o DIR``, its blank worksheet,
    and ``roster-ID.csv`` (:mod:`tutor.authoring.variants`: the seed, the roster's rules, nothing half-written)."""
    import shlex

    from ..authoring.variants import draw_variants, index_name, read_roster, write_handouts
    from ..exercise.catalog import resolve

    roster = read_roster(students, str(students), column, name_column)  # the roster's problems before any drawing
    ex = resolve(like, folders(environment(ctx), exercises))
    source = " ".join(shlex.quote(str(a)) for a in [like, *(f"--exercises={d}" for d in exercises or ())])
    variants = draw_variants(ex, roster, source=None if source == ex.id else source, folder=output)
    write_handouts(ex, variants, output, worksheet=worksheet.value, force=force)
    warn(t("handouts.wrote", n=len(variants), id=ex.id, path=output, index=output / index_name(ex)))
    warn(t("handouts.next", path=shlex.quote(str(output))))
