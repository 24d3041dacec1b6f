"""Practice of FlashAttention's online softmax, pure: a client of the practice machine (:mod:`tutor.practice.machine`).

One query row of one head, its keys in blocks (:func:`tutor.flash.walk.online_row`):
per block the learner types the running max ``m``, the rescale factor
``alpha`` (from block 2 on; 0 while the old max is ``-inf``), the running sum ``l``
and the accumulator ``acc``; then ``o`` and ``lse``.  Each answer is one line
(a number; ``acc`` and ``o`` a row: ``2.24, 2.24`` or ``[2.24, 2.24]``: the
machine's ``row`` mode), graded by the machine against the exact walk.  What
this module supplies is what is asked (:class:`Ask`, :func:`asks`), what is
shown as a block begins (:class:`BlockStart`), the hints (the formula, the
quantity worked out: :func:`worked`) and the diagnosis: a wrong answer is
explained when it is what a misconception of the online softmax gives from the
right state before the block (:func:`tutor.flash.walk.block_floats` under the
knobs of :data:`tutor.flash.check.MISTAKES`): not rescaling ``acc`` or ``l``
when the max changes, ``alpha = exp(m_new − m_old)``, dividing by ``l`` at
every block.  Nothing is recorded in the progress store.

>>> from tutor.exercise.catalog import resolve; from tutor.flash.walk import tiled
>>> state, effects = start(tiled(resolve("single-head-3x4"), 1)[0])
>>> state, effects = handle(state, read_event("sqrt(2)"))
>>> [type(e).__name__ for e in effects]
['Correct', 'Prompt']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tutor.base.messages import Text, t
from tutor.exact.numbers import Exact, NegInf
from tutor.flash.walk import TiledRow, TiledVariant, block_floats

from ..practice.effects import Answered, Cell, Effect, Opening
from ..practice.events import read_event
from ..practice.grading import Graded
from ..practice.machine import Drill, Settings, State, begin, handle

if TYPE_CHECKING:
    from tutor.mistakes.diagnose import Diagnosis

__all__ = ["Ask", "BlockStart", "Tiled", "asks", "default_row", "handle", "read_event", "rises", "start", "worked"]

Name = Literal["m", "alpha", "l", "acc", "o", "lse"]

#: Hint 1 of each quantity: its formula (a message key).
FORMULAS: dict[Name, str] = {"m": "tiled.formula.m", "alpha": "tiled.formula.alpha", "l": "tiled.formula.l",
                             "acc": "tiled.formula.acc", "o": "tiled.practice.formula.o",
                             "lse": "tiled.practice.formula.lse"}


@dataclass(frozen=True)
class Ask:
    """One quantity to type: ``block`` (0-based; ``None`` for ``o`` and ``lse``), its ``name`` and right value."""

    block: int | None
    name: Name
    right: tuple[Exact, ...]

    @property
    def vector(self) -> bool:
        """``acc`` and ``o`` are rows ``[1×d_v]``; the others one number."""
        return self.name in ("acc", "o")

    @property
    def exact(self) -> tuple[tuple[Exact, ...], ...]:
        """The right value as the machine grades it: one row."""
        return (self.right,)

    @property
    def shape(self) -> tuple[int, int]:
        return (1, len(self.right))


def asks(row: TiledRow) -> tuple[Ask, ...]:
    """The quantities of ``row`` in the order they are computed: per block ``m``, ``alpha`` (not in
    block 1; 0 while the old max is ``-inf``, as FlashAttention-2's kernel takes it, also while ``m`` is
    still ``-inf``), ``l``, ``acc``; then ``o`` and ``lse``."""
    out: list[Ask] = []
    for b, block in enumerate(row.blocks):
        out.append(Ask(b, "m", (block.m,)))
        if block.alpha is not None:
            out.append(Ask(b, "alpha", (block.alpha,)))
        out += [Ask(b, "l", (block.l,)), Ask(b, "acc", block.acc)]
    return (*out, Ask(None, "o", row.o), Ask(None, "lse", (row.lse,)))


def rises(row: TiledRow) -> int:
    """How many blocks raise a finite running max (``alpha`` strictly between 0 and 1): the rescales to do."""
    return sum(1 for b in row.blocks if b.alpha is not None and 0 < b.alpha.value() < 1)


def default_row(rows: Sequence[TiledRow]) -> TiledRow:
    """The row a session practises when none is named: the first whose running max rises most often
    (the rescaling is what the online softmax is about), among the rows that may attend to some key."""
    live = [r for r in rows if not isinstance(r.lse, NegInf)] or list(rows)
    return max(live, key=lambda r: (rises(r), -r.row))


@dataclass(frozen=True)
class BlockStart(Opening):
    """A new block begins: show its keys, their scores and rows of V, and the state carried into it;
    ``block`` ``None``: the blocks are read, ``o`` and ``lse`` come next (show the last state)."""

    row: TiledRow
    block: int | None


Before = tuple[float, float, tuple[float, ...]]  # (m, l, acc) in floats before a block, right


@dataclass(frozen=True)
class Tiled(Drill[Ask]):
    """The quantities of ``row`` as the machine's questions; ``before`` the right state before each block."""

    row: TiledRow
    before: tuple[Before, ...]

    def opening(self, state: State[Ask], before: Ask | None) -> list[Effect]:
        block = state.step.block
        return [BlockStart(self.row, block)] if before is None or before.block != block else []

    def formula(self, step: Ask) -> Text:
        return t(FORMULAS[step.name])

    def worked(self, state: State[Ask]) -> tuple[Cell | None, str]:
        return None, worked(self.row, state.step)

    def miscount(self, step: Ask, found: int) -> str:
        key = "tiled.practice.count.vector" if step.vector else "tiled.practice.count.scalar"
        return t(key, name=step.name, n=len(step.right), found=found)

    def diagnose(self, state: State[Ask], answer: Answered, graded: Graded) -> tuple[tuple[Diagnosis, ...], int]:
        """The misconceptions whose value of the quantity, from the right state before its block, is what
        ``answer`` says (and not the right value), all shown (at most 3).  ``o`` and ``lse`` follow from
        ``acc`` and ``l`` as typed, so none is named there."""
        from tutor.flash.check import MISTAKES, matches
        from tutor.mistakes.diagnose import Diagnosis

        ask = state.step
        if ask.block is None:
            return (), 0
        right = self._floats(ask, TiledVariant())
        found = []
        for key, variant in MISTAKES:
            values = self._floats(ask, variant)
            if values != right and matches(values, answer[0], tolerance=state.settings.tolerance):
                found.append(Diagnosis(key, t(f"diagnose.{key}")))
        return tuple(found), min(len(found), 3)

    def _floats(self, ask: Ask, variant: TiledVariant) -> list[float]:
        """``ask``'s quantity in floats, from the right state before its block, under ``variant``."""
        assert ask.block is not None
        block = self.row.blocks[ask.block]
        V = [[float(x) for x in self.row.V[j]] for j in block.keys]
        m, alpha, lsum, acc = block_floats(*self.before[ask.block], [x.value() for x in block.scores], V, variant)
        return {"m": [m], "alpha": [alpha], "l": [lsum], "acc": acc}[ask.name]


def start(row: TiledRow, tolerance: float | None = None) -> tuple[State[Ask], list[Effect]]:
    """A session over ``row``'s quantities (:func:`asks`); ``tolerance`` as ``--tolerance``."""
    d_v = len(row.V[0])
    m, lsum, acc = -math.inf, 0.0, (0.0,) * d_v
    before = []
    for b in row.blocks:  # the right float walk, block by block (as tutor.flash.walk.online_floats)
        before.append((m, lsum, acc))
        V = [[float(x) for x in row.V[j]] for j in b.keys]
        m, _, lsum, out = block_floats(m, lsum, acc, [x.value() for x in b.scores], V)
        acc = tuple(out)
    return begin(Tiled(row, tuple(before)), asks(row), Settings("row", tolerance))


# --- the worked hint -------------------------------------------------------------------------------


def _paren(text: str) -> str:
    return f"({text})" if " " in text or text.startswith("-") else text


def _vec(xs: Sequence[object]) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


def worked(row: TiledRow, ask: Ask) -> str:
    """``ask`` worked out with its block's numbers, exact values in the answer grammar (the renderer
    writes the line as notation): ``alpha = exp(m_old - m) = exp(sqrt(2) - 2*sqrt(2)) = exp(-sqrt(2))``."""
    if ask.block is None:
        last = row.blocks[-1]
        if ask.name == "o":
            if isinstance(row.lse, NegInf):
                return f"o = acc / l = {_vec(last.acc)} / 0: 0/0, set to {_vec(row.o)} by convention"
            return f"o = acc / l = {_vec(last.acc)} / {_paren(str(last.l))}"
        if isinstance(row.lse, NegInf):
            return "lse = m + log(l) = -inf + log(0) = -inf"
        return f"lse = m + log(l) = {last.m} + log({last.l})"
    b = row.blocks[ask.block]
    prev = row.blocks[ask.block - 1] if ask.block else None
    m_old = str(prev.m) if prev else "-inf"
    live = [(j, p) for j, p, s in zip(b.keys, b.p, b.scores) if not isinstance(s, NegInf)]
    if ask.name == "m":
        return f"m = max(m_old, s_j) = max({', '.join([m_old] + [str(s) for s in b.scores])}) = {b.m}"
    if ask.name == "alpha":
        if isinstance(b.m, NegInf):  # exp(-inf - (-inf)) is no number: FlashAttention-2's kernel takes 0
            return f"alpha = 0: m_old = m = -inf, and FlashAttention-2 takes exp(m_old - 0) = {b.alpha}"
        return f"alpha = exp(m_old - m) = exp({m_old} - {_paren(str(b.m))}) = {b.alpha}"
    terms = [str(p) for _, p in live] if ask.name == "l" else [f"{_paren(str(p))}*{_vec(row.V[j])}" for j, p in live]
    if prev is not None and b.alpha is not None and not isinstance(prev.m, NegInf):
        old = _paren(str(prev.l)) if ask.name == "l" else _vec(prev.acc)
        terms.insert(0, f"{_paren(str(b.alpha))}*{old}")
    right = str(b.l) if ask.name == "l" else _vec(b.acc)
    if ask.name == "l":
        head = "l = alpha*l_old + Σ_block exp(s_j - m)" if ask.block else "l = Σ_block exp(s_j - m)"
    else:
        head = "acc = alpha*acc_old + Σ_block exp(s_j - m)*V_j" if ask.block else "acc = Σ_block exp(s_j - m)*V_j"
    sum_ = " + ".join(terms) or "0"
    return f"{head} = {sum_}" + ("" if sum_ == right else f" = {right}")
