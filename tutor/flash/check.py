"""`check` of a worked online softmax: a solution file's ``tiled:`` part judged block by block, mistakes named.

The part, beside (or instead of) the steps of a solution file::

    tiled:
      block_size: 1        # keys per block
      query: t1            # the query row: its label, or its number counted from 1
      head: 1              # counted from 1; only with several heads
      blocks:              # in order; each block's m, alpha (not in the first), l, acc (any of them)
        - {m: 1.414214, l: 1, acc: [1, 1]}
        - {alpha: 0.243117, m: 2.828427, l: 1.243117, acc: [2.243117, 2.243117]}
      o: [1.891617, 1.891617]
      lse: 3.636293

Every entry is judged by the one grading rule (:func:`tutor.answers.judge`)
against the exact online softmax (:func:`tutor.flash.walk.online_row`); the
first wrong quantity is recomputed under each misconception
(:class:`tutor.flash.walk.TiledVariant`: not rescaling acc or l when the max
changes, alpha = exp(m_new − m_old), dividing by l at every block) and the
ones whose float walk lies within what was written are named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..answers import Entry, judge
from ..answers.grading import claim
from ..audit.tiled_part import Quantity, TiledGiven
from ..base.messages import t
from ..exact.numbers import Exact
from .walk import TiledRow, TiledVariant, online_floats, tiled

if TYPE_CHECKING:
    from ..exercise.record import Exercise


#: The misconceptions of the online softmax: key, variant.
MISTAKES: tuple[tuple[str, TiledVariant], ...] = (
    ("tiled_no_rescale_acc", TiledVariant(rescale_acc=False)),
    ("tiled_no_rescale_l", TiledVariant(rescale_l=False)),
    ("tiled_alpha_inverted", TiledVariant(alpha_inverted=True)),
    ("tiled_divide_per_block", TiledVariant(divide_per_block=True)),
)


# --- the audit ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    quantity: Quantity
    expected: tuple[Exact, ...] | None  # None: the walk has no such quantity (a block too many, alpha of block 1)
    wrong: tuple[int, ...]


@dataclass(frozen=True)
class TiledReport:
    given: TiledGiven
    row: TiledRow
    judged: tuple[Judged, ...]
    diagnoses: tuple[tuple[str, str], ...]  # (key, sentence) for the first wrong quantity

    @property
    def first(self) -> Judged | None:
        return next((j for j in self.judged if j.wrong or j.expected is None), None)

    @property
    def ok(self) -> bool:
        return self.first is None


def _expected(row: TiledRow, q: Quantity) -> tuple[Exact, ...] | None:
    if q.block is None:
        return row.o if q.name == "o" else (row.lse,)
    if q.block >= len(row.blocks):
        return None
    b = row.blocks[q.block]
    value = getattr(b, q.name)
    if value is None:
        return None
    return tuple(value) if q.name == "acc" else (value,)


def _float_of(walk: dict[str, Any], q: Quantity) -> list[float] | None:
    if q.block is None:
        v = walk[q.name]
        return list(v) if q.name == "o" else [v]
    blocks = walk["blocks"]
    if q.block >= len(blocks) or q.name not in blocks[q.block]:
        return None
    v = blocks[q.block][q.name]
    return list(v) if q.name == "acc" else [v]


def matches(values: Sequence[float], entries: Sequence[Entry | None], tolerance: float | None = None) -> bool:
    """Whether every written entry's claim (:func:`tutor.answers.grading.claim`; ``None``: not written)
    holds the float ``values`` of a mistake's walk (within 1e-9 relatively: the walk is float64)."""
    if len(values) != len(entries):
        return False
    for v, e in zip(values, entries):
        if e is None:
            continue
        lo, hi = claim(e, tolerance=tolerance)
        slack = 1e-9 * max(1.0, abs(v))
        if not lo - slack <= v <= hi + slack:
            return False
    return True


def audit_tiled(ex: Exercise, given: TiledGiven, *, tolerance: float | None = None) -> TiledReport:
    """Judge every quantity of ``given`` and name the misconceptions that explain the first wrong one."""
    from ..steps import solve

    row = next(r for r in tiled(ex, given.block_size, given.head) if r.row == given.row)
    judged = []
    for q in given.quantities:
        exp = _expected(row, q)
        if exp is None or len(exp) != len(q.entries):
            judged.append(Judged(q, None, tuple(range(len(q.entries)))))
            continue
        wrong = tuple(i for i, (e, x) in enumerate(zip(q.entries, exp))
                      if e is not None and not judge(e, x, tolerance=tolerance).right)
        judged.append(Judged(q, exp, wrong))
    report = TiledReport(given, row, tuple(judged), ())
    first = report.first
    if first is None:
        return report
    scores = [x.value() for b in row.blocks for x in b.scores]  # the scores the softmax reads (biased, masked)
    V = [list(r) for r in solve(ex).step("v", given.head).value]
    found = []
    for key, variant in MISTAKES:
        walk = online_floats(scores, V, given.block_size, variant)
        values = _float_of(walk, first.quantity)
        right = _float_of(online_floats(scores, V, given.block_size), first.quantity)
        if values is not None and values != right and matches(values, first.quantity.entries, tolerance):
            found.append((key, t(f"diagnose.{key}")))
    return TiledReport(given, row, tuple(judged), tuple(found))


def _json_value(x: Exact) -> float | str:
    """A right value in check's JSON: its float, ``"-inf"`` for ``-inf`` (as the steps' ``expected``; JSON has no infinity)."""
    v = x.value()
    return "-inf" if v == float("-inf") else v


def tiled_json(ex: Exercise, rep: TiledReport) -> dict[str, Any]:
    """The report as JSON: the row, each quantity's verdict with what was written and the right values."""
    items = []
    for j in rep.judged:
        q = j.quantity
        items.append({"block": q.block, "name": q.name, "field": q.field,
                      "verdict": "wrong" if (j.wrong or j.expected is None) else "correct",
                      "written": [None if e is None else e.text for e in q.entries],
                      "expected": None if j.expected is None else [_json_value(x) for x in j.expected],
                      "wrong_cells": list(j.wrong)})
    first = rep.first
    return {"head": rep.given.head, "row": rep.given.row, "query": ex.query_labels[rep.given.row],
            "block_size": rep.given.block_size, "quantities": items,
            "first_wrong": None if first is None else {"block": first.quantity.block, "name": first.quantity.name},
            "diagnoses": [{"key": k, "message": m} for k, m in rep.diagnoses],
            "verdict": "correct" if rep.ok else "wrong"}


def tiled_lines(ex: Exercise, rep: TiledReport) -> list[str]:
    """The report as the lines a learner reads (Unicode notation; the console transliterates)."""
    g = rep.given
    head = t("tiled.row.head", head=g.head + 1) if ex.num_heads > 1 else ""
    out = [t("tiled.check.title", query=ex.query_labels[g.row], head=head, block=g.block_size)]
    for j in rep.judged:
        q = j.quantity
        name = t("tiled.practice.label", n=q.block + 1, name=q.name) if q.block is not None else q.name
        if j.expected is None:
            out.append("  " + t("tiled.check.none.marked", quantity=name))
        elif j.wrong:
            right = [f"{x.value():.6f}" for x in j.expected]
            vector = q.name in ("acc", "o")
            written = [q.entries[i].text if q.entries[i] else "~" for i in j.wrong]  # type: ignore[union-attr]
            cells = t("list.sep.clauses").join(
                t("tiled.check.cell.at", entry=f"d{i + 1}", written=w, right=right[i]) if vector
                else t("tiled.check.cell", written=w, right=right[i]) for i, w in zip(j.wrong, written, strict=True))
            out.append("  " + t("tiled.check.wrong.marked", quantity=name, cells=cells))
        else:
            out.append("  " + t("tiled.check.right.marked", quantity=name))
    for _, message in rep.diagnoses:
        out.append("  " + t("tiled.check.diagnosis", message=message))
    if not rep.ok and not rep.diagnoses:
        out.append("  " + t("tiled.check.unexplained"))
    out.append(t("tiled.check.ok") if rep.ok else t("tiled.check.wrong"))
    return out
