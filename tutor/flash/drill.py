"""Practice of FlashAttention's online softmax, pure: ``handle(state, event) -> (state, effects)``; no I/O.

One query row of one head, its keys in blocks (:func:`tutor.flash.walk.online_row`):
per block the learner types the running max ``m``, the rescale factor
``alpha`` (from block 2 on, once ``m`` is a number), the running sum ``l``
and the accumulator ``acc``; then ``o`` and ``lse``.  Each answer is one line
(a number; ``acc`` and ``o`` a row: ``2.24, 2.24`` or ``[2.24, 2.24]``),
judged entry by entry by the one rule (:func:`tutor.answers.judge`, with
practice's policy :func:`tutor.answers.practice_verdict`) against the exact
walk.  A wrong answer is explained when it is what a misconception of the
online softmax gives from the right state before the block
(:func:`tutor.flash.walk.block_floats` under the knobs of
:data:`tutor.flash.check.MISTAKES`): not rescaling ``acc`` or ``l`` when the
max changes, ``alpha = exp(m_new − m_old)``, dividing by ``l`` at every block.

The events are the drill's (:mod:`tutor.practice.events`); the effects are this
module's.  Nothing here is recorded in the progress store.

>>> from tutor.exercise.catalog import resolve; from tutor.flash.walk import tiled
>>> state, effects = start(tiled(resolve("single-head-3x4"), 1)[0])
>>> state, effects = handle(state, read_event("sqrt(2)"))
>>> [type(e).__name__ for e in effects]
['Correct', 'Prompt']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tutor.answers import Entry, judge, parse_row, practice_verdict
from tutor.base.errors import AnswerError
from tutor.base.messages import t
from tutor.exact.numbers import Exact, NegInf
from tutor.flash.walk import TiledRow, TiledVariant, block_floats

from ..practice.events import Command, EndOfInput, Event, Interrupt, read_event

__all__ = ["Ask", "BlockStart", "Coarse", "Correct", "Help", "Hint", "Invalid", "Prompt", "Result", "Reveal",
           "ShapeInfo", "Skipped", "State", "Summary", "Wrong", "asks", "default_row", "handle", "read_event",
           "start", "worked"]

Name = Literal["m", "alpha", "l", "acc", "o", "lse"]


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


def asks(row: TiledRow) -> tuple[Ask, ...]:
    """The quantities of ``row`` in the order they are computed: per block ``m``, ``alpha`` (not in
    block 1, nor while ``m`` is still ``-inf``: no number then), ``l``, ``acc``; then ``o`` and ``lse``."""
    out: list[Ask] = []
    for b, block in enumerate(row.blocks):
        out.append(Ask(b, "m", (block.m,)))
        if block.alpha is not None and not isinstance(block.m, NegInf):
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


# --- effects -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockStart:
    """A new block begins: show its keys, their scores and rows of V, and the state carried into it;
    ``block`` ``None``: the blocks are read, ``o`` and ``lse`` come next (show the last state)."""

    row: TiledRow
    block: int | None


@dataclass(frozen=True)
class Prompt:
    ask: Ask


@dataclass(frozen=True)
class Invalid:
    """Typed text that is not an answer to this quantity: one line saying why; nothing was graded."""

    message: str


@dataclass(frozen=True)
class Correct:
    ask: Ask
    attempt: int


@dataclass(frozen=True)
class Wrong:
    """A wrong answer: ``wrong`` the wrong entries (0-based), ``diagnoses`` ``(key, sentence)`` of the
    misconceptions that give what was typed, ``coarse`` entries written coarser than 2 decimals,
    ``truncated`` wrong entries that are the value cut instead of rounded."""

    ask: Ask
    answer: tuple[Entry, ...]
    wrong: tuple[int, ...]
    diagnoses: tuple[tuple[str, str], ...]
    attempt: int
    coarse: tuple[int, ...] = ()
    truncated: tuple[int, ...] = ()


@dataclass(frozen=True)
class Coarse:
    """No entry is wrong, but ``cells`` are written coarser than 2 decimals: asked again, nothing counted."""

    ask: Ask
    answer: tuple[Entry, ...]
    cells: tuple[int, ...]


@dataclass(frozen=True)
class Hint:
    """Hint ``level``: 1 the formula, 2 the quantity worked out with this block's numbers, 3 and on none."""

    ask: Ask
    level: int
    work: str = ""


@dataclass(frozen=True)
class ShapeInfo:
    ask: Ask


@dataclass(frozen=True)
class Reveal:
    ask: Ask


@dataclass(frozen=True)
class Skipped:
    ask: Ask


@dataclass(frozen=True)
class Help:
    """List the commands and how to type an answer."""


@dataclass(frozen=True)
class Result:
    """How one quantity ended (``None``: not finished; ``seen``: on screen when the session ended)."""

    ask: Ask
    outcome: Literal["correct", "shown", "skipped"] | None = None
    attempts: int = 0
    hints: int = 0
    diagnoses: tuple[str, ...] = ()
    seen: bool = False


@dataclass(frozen=True)
class Summary:
    results: tuple[Result, ...]
    reason: Literal["done", "quit", "end", "interrupt"]


Effect = (BlockStart | Prompt | Invalid | Correct | Wrong | Coarse | Hint | ShapeInfo | Reveal | Skipped | Help
          | Summary)


# --- state --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Where a session is.  Build with :func:`start`; never mutate (use :func:`handle`)."""

    row: TiledRow
    asks: tuple[Ask, ...]
    before: tuple[tuple[float, float, tuple[float, ...]], ...]  # (m, l, acc) in floats before each block, right
    tolerance: float | None = None
    index: int = 0
    attempts: int = 0
    hints: int = 0
    diagnoses: tuple[str, ...] = ()
    results: tuple[Result, ...] = ()
    done: bool = False

    @property
    def ask(self) -> Ask:
        return self.asks[self.index]


def start(row: TiledRow, tolerance: float | None = None) -> tuple[State, list[Effect]]:
    """A session over ``row``'s quantities (:func:`asks`); ``tolerance`` as ``--tolerance``."""
    d_v = len(row.V[0])
    m, lsum, acc = -math.inf, 0.0, (0.0,) * d_v
    before = []
    for b in row.blocks:  # the right float walk, block by block (as tutor.flash.walk.online_floats)
        before.append((m, lsum, acc))
        V = [[float(x) for x in row.V[j]] for j in b.keys]
        m, _, lsum, out = block_floats(m, lsum, acc, [x.value() for x in b.scores], V)
        acc = tuple(out)
    state = State(row, asks(row), tuple(before), tolerance)
    return state, [BlockStart(row, 0), Prompt(state.ask)]


def handle(state: State, event: Event) -> tuple[State, list[Effect]]:
    """The next state and the effects of ``event``.  A finished state ignores every event."""
    if state.done:
        return state, []
    if isinstance(event, Interrupt):
        return _finish(state, "interrupt")
    if isinstance(event, EndOfInput):
        return _finish(state, "end")
    if isinstance(event, Command):
        return _command(state, event.name)
    return _answer(state, event.text)


def _command(state: State, name: str) -> tuple[State, list[Effect]]:
    ask = state.ask
    if name == "quit":
        return _finish(state, "quit")
    if name == "help":
        return state, [Help(), Prompt(ask)]
    if name == "shape":
        return state, [ShapeInfo(ask), Prompt(ask)]
    if name == "hint":
        level = state.hints + 1
        state = replace(state, hints=level)
        return state, [Hint(ask, level, worked(state.row, ask) if level == 2 else ""), Prompt(ask)]
    outcome: Literal["shown", "skipped"] = "shown" if name == "show" else "skipped"
    shown: Effect = Reveal(ask) if outcome == "shown" else Skipped(ask)
    return _advance(state, Result(ask, outcome, state.attempts, state.hints, state.diagnoses), [shown])


def _answer(state: State, text: str) -> tuple[State, list[Effect]]:
    ask = state.ask
    if not text.strip():
        return state, [Prompt(ask)]
    try:
        answer = parse_row(text)
    except AnswerError as err:
        return state, [Invalid(str(err)), Prompt(ask)]
    if len(answer) != len(ask.right):
        key = "tiled.practice.count.vector" if ask.vector else "tiled.practice.count.scalar"
        return state, [Invalid(t(key, name=ask.name, n=len(ask.right), found=len(answer))), Prompt(ask)]
    wrong, coarse, truncated = [], [], []
    for i, (e, x) in enumerate(zip(answer, ask.right)):
        j = judge(e, x, tolerance=state.tolerance)
        verdict = practice_verdict(j)
        if verdict == "coarse":
            coarse.append(i)
        elif verdict == "wrong":
            wrong.append(i)
            if j.truncated:
                truncated.append(i)
    if not wrong and not coarse:
        result = Result(ask, "correct", state.attempts, state.hints, state.diagnoses)
        return _advance(state, result, [Correct(ask, state.attempts + 1)])
    if not wrong:
        return state, [Coarse(ask, answer, tuple(coarse)), Prompt(ask)]
    found = diagnose(state, ask, answer)
    keys = state.diagnoses + tuple(k for k, _ in found[:1] if k not in state.diagnoses)
    state = replace(state, attempts=state.attempts + 1, diagnoses=keys)
    return state, [Wrong(ask, answer, tuple(wrong), tuple(found), state.attempts, tuple(coarse), tuple(truncated)),
                   Prompt(ask)]


def _advance(state: State, result: Result, effects: list[Effect]) -> tuple[State, list[Effect]]:
    state = replace(state, results=state.results + (result,))
    index = state.index + 1
    if index >= len(state.asks):
        state = replace(state, done=True)
        return state, effects + [Summary(state.results, "done")]
    before = state.ask.block
    state = replace(state, index=index, attempts=0, hints=0, diagnoses=())
    block = state.ask.block
    if block != before:
        effects.append(BlockStart(state.row, block))
    return state, effects + [Prompt(state.ask)]


def _finish(state: State, reason: Literal["done", "quit", "end", "interrupt"]) -> tuple[State, list[Effect]]:
    done = len(state.results)
    current = Result(state.ask, None, state.attempts, state.hints, state.diagnoses, seen=True)
    rest = tuple(Result(a) for a in state.asks[done + 1:])
    results = state.results + (current,) + rest
    state = replace(state, done=True, results=results)
    return state, [Summary(results, reason)]


# --- the mistakes --------------------------------------------------------------------------------


def _floats(state: State, ask: Ask, variant: TiledVariant) -> list[float]:
    """``ask``'s quantity in floats, from the right state before its block, under ``variant``."""
    assert ask.block is not None
    block = state.row.blocks[ask.block]
    V = [[float(x) for x in state.row.V[j]] for j in block.keys]
    m, alpha, lsum, acc = block_floats(*state.before[ask.block], [x.value() for x in block.scores], V, variant)
    return {"m": [m], "alpha": [alpha], "l": [lsum], "acc": acc}[ask.name]


def diagnose(state: State, ask: Ask, answer: Sequence[Entry]) -> list[tuple[str, str]]:
    """The misconceptions whose value of ``ask``, from the right state before its block, is what
    ``answer`` says (and not the right value): ``[(key, sentence)]``.  ``o`` and ``lse`` follow from
    ``acc`` and ``l`` as typed, so none is named there."""
    from tutor.flash.check import MISTAKES, matches

    if ask.block is None:
        return []
    right = _floats(state, ask, TiledVariant())
    found = []
    for key, variant in MISTAKES:
        values = _floats(state, ask, variant)
        if values != right and matches(values, answer, tolerance=state.tolerance):
            found.append((key, t(f"diagnose.{key}")))
    return found


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
