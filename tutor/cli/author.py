"""`validate`, `new`, `schema` (issue 5): the commands for instructors.

``validate`` reports every problem of every exercise file (exit 0 when all
are valid, 2 otherwise; ``--format json`` for a pack's CI), ``new`` writes a
commented exercise whose numbers are small enough for paper, ``schema``
prints the JSON Schema the loader's model produces.  What they compute lives
in :mod:`tutor.authoring` and :mod:`tutor.generate`; here options are parsed
and results printed.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..jsontext import document
from ..messages import t
from .common import Format, FormatOpt, warn, write, write_document


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
) -> None:
    """Validate files and folders; exit 0 when all are valid, 2 otherwise."""
    from ..authoring import validate as validate_files

    report = validate_files(paths)
    if fmt is Format.json:
        # ASCII (non-ASCII and control characters as \u escapes): safe on any stream
        write_document(document(report.document()))
    else:
        for line in report.lines():
            write(line)
        warn(report.summary())
    raise typer.Exit(0 if report.ok else 2)


# --- new -----------------------------------------------------------------------------


def new(
    tokens: Annotated[int, typer.Option("--tokens", help=t("cli.new.tokens"), min=1, max=16)] = 3,
    d_model: Annotated[int, typer.Option("--d-model", help=t("cli.new.d_model"), min=1, max=32)] = 4,
    heads: Annotated[int, typer.Option("--heads", help=t("cli.new.heads"), min=1, max=8)] = 1,
    d_k: Annotated[int, typer.Option("--d-k", help=t("cli.new.d_k"), min=1, max=32)] = 2,
    mask: Annotated[MaskChoice, typer.Option("--mask", help=t("cli.new.mask"))] = MaskChoice.none,
    cross: Annotated[int | None, typer.Option("--cross", help=t("cli.new.cross"), min=1, max=16, show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=t("cli.new.seed"), min=0, show_default=False)] = None,
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
) -> None:
    """Write a generated exercise to ``-o FILE`` (never over an existing one without ``--force``) or stdout."""
    from ..authoring import write_exercise
    from ..errors import TutorError
    from ..exercise import validate_text
    from ..generate import Spec, generate

    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big") % 1_000_000
    spec = Spec(tokens=tokens, d_model=d_model, heads=heads, d_k=d_k, mask=mask.value, cross=cross, seed=seed,
                difficulty=difficulty, id=exercise_id, title=title, kv_heads=kv_heads, cache=cache, alibi=alibi)
    if exercise_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", exercise_id):
        raise typer.BadParameter(t("new.bad_id", found=exercise_id), param_hint="--id")
    if heads * d_k > 32:
        raise typer.BadParameter(t("new.too_wide", heads=heads, d_k=d_k, product=heads * d_k), param_hint="--heads/--d-k")
    if mask is MaskChoice.padding and (cross or tokens) + (cache or 0) < 2:
        raise typer.BadParameter(t("new.padding_keys"), param_hint="--mask")
    try:  # format v2: --kv-heads, --cache, --mask causal_lower_right, --alibi
        from ..generate_llm import check_v2

        check_v2(spec)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--kv-heads/--cache/--mask/--alibi") from None
    if title is not None:
        _check_title(title)
    text = generate(spec)
    checked = validate_text(text, "<new>")  # nothing is written until it is valid
    if not checked.ok:  # --id or --title may be invalid; the generator's own numbers always are valid
        for p in checked.problems:
            if p.field in ("id", "title"):
                raise typer.BadParameter(p.message, param_hint=f"--{p.field}")
        raise TutorError("\n".join(str(p) for p in checked.problems))
    if output is None:
        write_document(text)
        return
    write_exercise(text, output, force=force)
    warn(t("new.wrote", path=output, id=checked.exercise.id if checked.exercise else ""))


def _check_title(title: str) -> None:
    """A usage error for a ``--title`` with a control character (ESC, NUL, ...): it would be written into the file.

    Line breaks and tabs are fine: the title is written on one line, whitespace collapsed.
    """
    import unicodedata

    from ..yamlread import codepoint

    for ch in title:
        if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r":
            raise typer.BadParameter(t("new.bad_title", char=codepoint(ch)), param_hint="--title")


# --- schema --------------------------------------------------------------------------


def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from ..exercise import json_schema

    write_document(document(json_schema()))
