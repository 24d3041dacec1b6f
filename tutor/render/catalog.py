"""The catalogue as a table: every exercise with where it comes from (bundled or a pack folder)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..messages import t
from .text import asciify


def render_catalog(rows: list[dict[str, Any]], console: Console) -> None:
    """One row per exercise: id, title, L, L_k, d_model, heads, mask, and its source (``bundled`` or the pack folder)."""
    uni = (console.encoding or "").lower().replace("-", "").startswith("utf")
    tx = (lambda s: s) if uni else asciify
    if not rows:
        console.print(t("list.empty"))
        return
    packs = any(r["source"] != "bundled" for r in rows)
    table = Table(title=tx(t("list.title.packs" if packs else "list.title")), box=box.SIMPLE_HEAD if uni else box.ASCII,
                  title_justify="left")
    table.add_column(t("list.col.id"), no_wrap=True, style="bold")
    table.add_column(t("list.col.title"), overflow="fold")
    for name in ("L", "L_k", "d_model"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column(t("list.col.heads"), justify="right", no_wrap=True)
    table.add_column(t("list.col.mask"), no_wrap=True)
    table.add_column(t("list.col.source"), overflow="fold", min_width=7)
    for r in rows:
        table.add_row(r["id"], tx(r["title"]), str(r["L"]), str(r["L_k"]), str(r["d_model"]), str(r["heads"]), r["mask"],
                      tx(r["source"]))
    console.print(table)
