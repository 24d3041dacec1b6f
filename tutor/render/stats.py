"""What ``attn-tutor stats`` shows in a terminal: practice by step, mistakes by kind, the schedule, the drills.

Rendered from the same document ``stats --format json`` prints
(:func:`tutor.practice.stats.stats_document`, with the drills' section of
:func:`tutor.drills.results.drills_document`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..base.cells import widest
from ..base.messages import plural, t
from .drill import DrillView
from .rich import RichRenderer
from .text import print_command


def render_stats(data: dict, console: Console, now: datetime | None = None) -> None:
    """``attn-tutor stats`` for a terminal, from the same dict ``--format json`` prints; due times
    are shown relative to ``now`` (default: the current time)."""
    r = RichRenderer(console)
    tx = r.tx
    now = now or datetime.now(UTC)

    def line(text: str, style: str = "", indent: int = 0) -> None:
        item: RenderableType = Text(tx(text), style=style)
        console.print(Padding(item, (0, 0, 0, indent), expand=False) if indent else item)

    if not data["answers"]:
        line(t("stats.empty"), "bold")
    else:
        line(t("stats.header", sessions=plural("stats.sessions", data["sessions"]),
               answers=plural("stats.answers", data["answers"])), "bold")
        console.print()
        line(t("stats.by_step"), "bold")
        for item in _step_tables(data["steps"], r, now):
            console.print(Padding(item, (0, 0, 0, 2), expand=False))
        if data["due_now"]:
            console.print()
            line(t("stats.due.count", count=len(data["due_now"])), "bold")
        if data["mistakes"]:
            console.print()
            shown, made = len(data["mistakes"]), data.get("mistake_kinds", len(data["mistakes"]))
            line(t("stats.mistakes") if shown >= made else t("stats.mistakes.top", shown=shown, made=made), "bold")
            for m in data["mistakes"]:
                line(t("stats.mistake", count=m["count"], name=m["name"]), indent=2)
                places = t("list.sep").join(_place(p) for p in m["where"])
                line(t("stats.mistake.where", places=places), "dim", indent=6)
    nxt = data["next"]
    if nxt is not None:
        console.print()
        if nxt["graded"]:
            why = t("stats.next.weak", step=nxt["step"], right=nxt["correct"], graded=nxt["graded"])
        else:
            why = t("stats.next.new", step=nxt["step"])
        line(t("stats.next", why=why, exercise=nxt["exercise"]), "bold")
        print_command(console, tx(nxt["command"]).split(" "))  # the exercise id comes from the store
    if data.get("left_out"):
        line(plural("stats.left_out", data["left_out"]))
    if data.get("drills"):  # issue 14: the drills section
        render_drill_stats(data["drills"], console)
    line(t("stats.file", path=data["store"]), "dim")


def _place(p: dict) -> str:
    """``single-head-3x4 scaled ×2``, ``two-head-causal-3x4 weights (head 2) ×1``: heads counted from 1,
    named for an exercise of several heads (or one whose heads are not known)."""
    if p["head"] is None or p.get("heads") == 1:
        place = t("stats.place", exercise=p["exercise"], step=p["step"])
    else:
        place = t("stats.place.head", exercise=p["exercise"], step=p["step"], head=p["head"] + 1)
    return t("stats.place.count", place=place, count=p["count"])


def when(due: str | None, now: datetime) -> str:
    """A due time (ISO 8601) as a learner reads it: ``now``, ``in 3 days``; ``-`` for none."""
    if due is None:
        return "-"
    moment = datetime.fromisoformat(due)
    if moment <= now:
        return t("stats.due.now")
    return t("stats.due.in", days=math.ceil((moment - now).total_seconds() / 86400))


_STAT_COLUMNS = (("stats.col.right", "correct"), ("stats.col.graded", "graded"), ("stats.col.accuracy", "accuracy"),
                 ("stats.col.shown", "shown"), ("stats.col.skipped", "skipped"), ("stats.col.due", "due"),
                 ("stats.col.retention", "retention"))


def _stat_cell(s: dict, field: str, now: datetime) -> str:
    if field in ("accuracy", "retention"):
        return percent(s[field])
    if field == "due":
        return when(s["due"], now)
    return str(s[field])


def _step_tables(steps: Sequence[dict], r: RichRenderer, now: datetime) -> list[RenderableType]:
    """The accuracy-by-step table, split into tables that each fit the console (every one
    repeating the step column): no header or step name is ever cut.  Where not even one
    column fits beside the step names, one line of text per step instead."""
    tx = r.tx
    names = [tx(s["step"]) for s in steps]
    header = tx(t("stats.col.step"))
    columns = [(tx(t(key)), [tx(_stat_cell(s, field, now)) for s in steps]) for key, field in _STAT_COLUMNS]
    step_w = widest([header, *names])  # in cells, as the table lays them out: a header may be Chinese
    widths = [widest([h, *cells]) for h, cells in columns]
    budget = r.console.width - 2  # the indent

    def width(group: Sequence[int]) -> int:  # borders: one per column and one more; padding: 1 each side
        return step_w + sum(widths[j] for j in group) + 3 * (len(group) + 1) + 1

    groups: list[list[int]] = [[]]
    for j in range(len(columns)):
        if groups[-1] and width(groups[-1] + [j]) > budget:
            groups.append([])
        groups[-1].append(j)
    if any(width(group) > budget for group in groups):
        return [Text(t("stats.step.line", step=name, stats=t("list.sep").join(
            t("stats.step.stat", column=h, value=cells[i]) for h, cells in columns))) for i, name in enumerate(names)]
    out: list[RenderableType] = []
    for group in groups:
        table = Table(box=r.box, padding=(0, 1), expand=False)
        table.add_column(header, no_wrap=True, style="bold", min_width=step_w)
        for j in group:
            table.add_column(columns[j][0], justify="right", no_wrap=True, min_width=widths[j])
        for i, name in enumerate(names):
            table.add_row(name, *(columns[j][1][i] for j in group))
        out.append(table)
    return out


def percent(x: float | None) -> str:
    """``0.5`` -> ``50%``; ``None`` -> ``-``."""
    return "-" if x is None or math.isnan(x) else f"{round(100 * x)}%"


def render_drill_stats(doc: dict[str, Any], console: Console) -> None:
    """The drills section of ``attn-tutor stats``, from the dict ``--format json`` prints under ``drills``."""
    view = DrillView(console)
    if not doc["topics"] and not doc.get("katas"):
        return
    console.print()
    if doc.get("katas"):
        view.line(t("stats.katas"), "bold")
        for k in doc["katas"]:
            key = "stats.katas.passed" if k["passed"] else "stats.katas.pending"
            view.line(t(key, kata=k["kata"], checks=k["checks"], passes=k["passed"]), indent=2)
    if doc["topics"]:
        view.line(t("stats.drills", answers=plural("stats.answers", doc["answers"])), "bold")
    for s in doc["topics"]:
        accuracy = "-" if s["accuracy"] is None else f"{round(100 * s['accuracy'])}%"
        view.line(t("stats.drills.topic", drill=s["drill"], topic=s["topic"], right=s["correct"], graded=s["graded"],
                    accuracy=accuracy), indent=2)
    if doc["review"]:
        view.line(t("stats.drills.review"), "bold")
        for r in doc["review"]:
            view.bullet(t("drill.review.item.stats", topic=r["topic"], drill=r["drill"], command=r["command"]))
