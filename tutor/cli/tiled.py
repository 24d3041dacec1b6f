"""`explain --tiled` and `practice --tiled`: FlashAttention's online softmax, one query row at a time (issue 13)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from ..base.env import Env
from ..base.messages import t
from ..exercise.record import Exercise
from .common import check_head, check_tolerance, console, environment, write_json


def explain_tiled(env: Env, ex: Exercise, *, head: int | None, block_size: int, precision: int, fmt: str) -> None:
    """Print every query row's online softmax (of ``head``, 0-based, or of every head) in blocks of
    ``block_size`` keys: text (on a console of ``env``), or JSON with ``--format json`` (the contract's
    ``tiled`` list)."""
    from ..flash.walk import tiled

    rows = tiled(ex, block_size, head)
    if fmt == "json":
        from ..render.tiled import tiled_document

        write_json(tiled_document(ex, rows))
        return
    from ..render.tiled import TiledRenderer

    TiledRenderer(console(env), precision).render(ex, rows)


def practice_tiled(ctx: typer.Context, exercise: str | None, *, head: int | None, block_size: int, query: str | None,
                   tolerance: float | None, folders: Sequence[Path], others: Sequence[str]) -> None:
    """``practice EXERCISE --tiled``: type one query row's online softmax, block by block (of ``head``,
    counted from 1; the query by label or number from 1, else the row whose max rises most often).

    Usage errors (exit 2) for options that choose steps or a schedule (``others``), no exercise, a
    head or query the exercise does not have; the closed standard input is refused before anything
    is computed.  ``folders`` are the exercise packs.  Nothing is written to the progress store."""
    from ..exercise.catalog import resolve
    from ..flash.drill import default_row
    from ..flash.session import practise_tiled
    from ..flash.walk import tiled
    from ..practice.terminal import answer_stream
    from ..render.tiled_practice import TiledPracticeRenderer

    if others:
        raise typer.BadParameter(t("tiled.practice.alone", options=", ".join(others)), param_hint="--tiled")
    if exercise is None:
        raise typer.BadParameter(t("tiled.practice.exercise"), param_hint="EXERCISE")
    check_tolerance(tolerance)
    env = environment(ctx)
    stream = answer_stream(env.stdin)
    ex = resolve(exercise, folders)
    check_head(head, ex.num_heads)
    rows = tiled(ex, block_size, 0 if head is None else head - 1)
    if query is None:
        row = default_row(rows)
    else:
        labels = list(ex.query_labels)
        digits = query.strip()
        n = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 6 else None  # "²" is a digit to isdigit
        index = n - 1 if n is not None and 1 <= n <= ex.L else labels.index(query) if query in labels else None
        if index is None:
            raise typer.BadParameter(t("tiled.file.query", labels=", ".join(labels)), param_hint="--query")
        row = rows[index]
    practise_tiled(row, chosen=query is not None, tolerance=tolerance, stream=stream,
                   view=TiledPracticeRenderer(console(env), ex))
