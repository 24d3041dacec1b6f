"""`explain --tiled`: FlashAttention's online softmax, one query row at a time (issue 13)."""

from __future__ import annotations

from ..exercise.record import Exercise
from ..jsontext import document
from .common import console, write_document


def explain_tiled(ex: Exercise, *, head: int | None, block_size: int, precision: int, fmt: str) -> None:
    """Print every query row's online softmax (of ``head``, 0-based, or of every head) in blocks of
    ``block_size`` keys: text, or JSON with ``--format json`` (the contract's ``tiled`` list)."""
    from ..tiled import tiled

    rows = tiled(ex, block_size, head)
    if fmt == "json":
        from ..render.tiled import tiled_document

        write_document(document(tiled_document(ex, rows)))
        return
    from ..render.tiled import TiledRenderer

    TiledRenderer(console(), precision).render(ex, rows)
