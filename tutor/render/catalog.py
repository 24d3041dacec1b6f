"""The catalogue as a table: every exercise with where it comes from (bundled or a pack folder)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..base.ascii import asciify, is_utf
from ..base.messages import t
from ..base.textsafe import shown


def render_catalog(rows: list[dict[str, Any]], console: Console) -> None:
    """Every exercise: id, title, L, L_k, d_model, heads, mask, and its source (``bundled`` or the pack folder).

    A table when it fits the width with nothing wrapped or cut; otherwise two
    lines per exercise (the id and sizes, then the title), so an id a user has
    to type is never cut, whatever the width.
    """
    uni = is_utf(console.encoding)
    tx = shown if uni else (lambda s: asciify(shown(s)))  # a pack's titles and folder names are text from files
    if not rows:
        console.print(t("list.empty"))
        return
    packs = any(r["source"] != "bundled" for r in rows)
    title = tx(t("list.title.packs" if packs else "list.title"))
    headers = [t("list.col.status"), t("list.col.id"), t("list.col.title"), "L", "L_k", "d_model", t("list.col.heads"),
               t("list.col.mask"), t("list.col.source")]
    cells = [[status(r), tx(r["id"]), tx(r["title"]), str(r["L"]), str(r["L_k"]), str(r["d_model"]), str(r["heads"]),
              r["mask"], t("list.source.bundled") if r["source"] == "bundled" else tx(r["source"])] for r in rows]
    table = Table(title=title, caption=t("list.legend"), box=box.SIMPLE_HEAD if uni else box.ASCII, title_justify="left",
                  caption_justify="left")
    for i, h in enumerate(headers):
        table.add_column(h, no_wrap=True, justify="right" if 3 <= i <= 6 else "left", style="bold" if i == 1 else "")
    for c in cells:
        table.add_row(*c)
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    console.print(Text(title, style="bold"))
    for c in cells:
        line = Text(c[1], style="bold")
        line.append("  " + t("list.row.narrow", status=c[0], L=c[3], L_k=c[4], d_model=c[5], heads=c[6], mask=c[7],
                             source=c[8]))
        console.print(line)
        console.print(Text("  " + c[2], style="dim"))
    console.print(Text(t("list.legend"), style="dim"))


def status(row: dict[str, Any]) -> str:
    """``done`` (every step answered right at least once) or ``pending 3/7`` (steps answered right so far)."""
    if row["done"]:
        return t("list.done")
    return t("list.pending.progress", solved=row["solved"], total=row["steps"])
