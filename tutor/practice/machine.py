"""The practice drill as a pure state machine: ``handle(state, event) -> (state, effects)``.

One machine for every drill whose answers are values typed by hand, parameterised
by what it asks.  The machine owns what every drill shares: the cursor over the
questions, the commands (``hint``, ``shape``, ``show``, ``skip``, ``quit``,
``help``), the attempts and hints at each question, the end of input and Ctrl-C,
the results and the summary, the forms an answer is typed in, and grading by
the one rule (:mod:`.grading`).  A client, a :class:`Drill`, says what is asked:
the question (``Q``: its right value is ``exact``, ``[rows][cols]``), what is
shown as one begins, its hint, its diagnosis, and what is recorded
(:class:`tutor.practice.worked.Worked`: the steps of a worked solution, recorded
in the progress store; :class:`tutor.flash.drill.Tiled`: the online softmax's
quantities, recorded nowhere).

The forms (:class:`.effects.Mode`): in ``matrix`` mode an answer is a whole
matrix on one line (``1 1; 2 2; 2 2``), or row by row: a first line holding one
row of a taller matrix starts row-by-row input, which an empty line ends; a
matrix pasted as PyTorch or NumPy printed it over several lines
(``tensor([[1., 1.],`` then ``[2., 2.]])``) is collected until its brackets close
and read whole.  In
``entry`` mode every entry is asked for in turn, and after a wrong answer only
the wrong entries are asked again.  In ``row`` mode the answer is one row on one
line (``2.24, 2.24``), and a line with another number of entries is not an
answer.  Typed text goes through :mod:`tutor.answers` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from tutor.answers import (
    MAX_MATRIX_CHARS,
    ROUNDED_AWAY,
    TRUNCATED,
    Entry,
    entry_counts,
    parse_entry,
    parse_matrix,
    parse_row,
    printout_begins,
    printout_open,
)
from tutor.base.errors import AnswerError
from tutor.base.messages import Text, t
from tutor.exact.numbers import Exact
from tutor.store.attempt import Attempt, Outcome

from .effects import (
    Answered,
    Cell,
    Coarse,
    Correct,
    Effect,
    Help,
    Hint,
    Invalid,
    Mode,
    Opening,
    Prompt,
    Result,
    Reveal,
    RowByRow,
    ShapeInfo,
    Skipped,
    Summary,
    Wrong,
)
from .events import Command, EndOfInput, Event, Interrupt
from .grading import Graded, grade

if TYPE_CHECKING:
    from tutor.mistakes.diagnose import Diagnosis


class Question(Protocol):
    """What the machine reads of a question: its right value, entry by entry, and its shape."""

    @property
    def exact(self) -> Sequence[Sequence[Exact]]: ...

    @property
    def shape(self) -> tuple[int, int]: ...


Q = TypeVar("Q", bound=Question)


@dataclass(frozen=True)
class Settings:
    """How a session grades: ``mode`` (how an answer is typed) and ``tolerance``, the interval
    ``--tolerance`` gives every decimal (``None``: the rounding rule of :mod:`tutor.answers.grading`)."""

    mode: Mode = "matrix"
    tolerance: float | None = None


class Drill(Generic[Q]):
    """What a drill asks, supplied by a client of the machine: every client gives its hints
    (:meth:`formula`, :meth:`worked`), and :meth:`miscount` when it asks in ``row`` mode; the
    defaults of the rest show nothing as a question begins, explain no mistake, grade no cell
    exactly and record nothing.  A client is immutable (the machine's state holds it)."""

    #: the questions are named with their head (a multi-head exercise)
    multi_head: bool = False

    def opening(self, state: State[Q], before: Q | None) -> list[Effect]:
        """What is shown as ``state.step`` begins (``before``: the question before it, ``None`` at the start)."""
        return []

    def formula(self, step: Q) -> Text:
        """Hint 1: how ``step`` is computed."""
        raise NotImplementedError

    def worked(self, state: State[Q]) -> tuple[Cell | None, str]:
        """Hint 2: the entry worked out (``None``: the whole question) and its working."""
        raise NotImplementedError

    def diagnose(self, state: State[Q], answer: Answered, graded: Graded) -> tuple[tuple[Diagnosis, ...], int]:
        """The mistakes that explain a wrong ``answer``, most specific first, and how many of the
        first ones give the very same value (all shown)."""
        return (), 0

    def strict(self, step: Q) -> frozenset[Cell]:
        """The cells graded exactly, whatever is written (a mask fixes them)."""
        return frozenset()

    def attempt(self, state: State[Q], outcome: Outcome, attempt: int, *,
                diagnoses: tuple[str, ...] = (), notes: tuple[str, ...] = (), answer: str | None = None
                ) -> Attempt | None:
        """The record of the current question's ``attempt``-th try, or ``None``: nothing is recorded."""
        return None

    def miscount(self, step: Q, found: int) -> str:
        """``row`` mode: the sentence for a line of ``found`` entries where ``step`` has another number."""
        raise NotImplementedError

    def entry_name(self, step: Q, cell: Cell) -> tuple[str, str]:
        """``entry`` mode: the row and column ``cell`` is named by."""
        return str(cell[0] + 1), str(cell[1] + 1)

    def widest(self, step: Q) -> int:
        """The most entries a row of an answer to ``step`` may have to be read at all: a wider row is
        refused before any entry is parsed.  A wrong shape is still graded (and a mistake such as a
        transposed matrix named) up to this width; by default the step's rows or columns."""
        return max(step.shape)


# --- state ------------------------------------------------------------------------------


@dataclass(frozen=True)
class State(Generic[Q]):
    """Where a session is.  Build with :func:`begin` (a client's ``start``); never mutate (use :func:`handle`)."""

    drill: Drill[Q]
    steps: tuple[Q, ...]  # the questions, in order
    settings: Settings = Settings()
    index: int = 0
    attempts: int = 0  # wrong answers at the current question
    hints: int = 0  # hints given at the current question
    diagnoses: tuple[str, ...] = ()  # diagnosis keys at the current question
    last_wrong: tuple[Cell, ...] = ()
    rows: Answered = ()  # matrix mode: rows typed so far, row by row
    pasted: str = ""  # matrix mode: the lines so far of a printout pasted over several, its brackets still open
    grid: tuple[tuple[Entry | None, ...], ...] = ()  # entry mode: entries typed so far
    todo: tuple[Cell, ...] = ()  # entry mode: cells still to ask
    results: tuple[Result[Q], ...] = ()
    done: bool = False

    @property
    def step(self) -> Q:
        """The question being asked."""
        return self.steps[self.index]


def begin(drill: Drill[Q], steps: Sequence[Q], settings: Settings = Settings(), *,
          at: int = 0) -> tuple[State[Q], list[Effect]]:
    """A new session over ``steps``, and its first effects.  The questions before index ``at`` are
    given, not asked (a session resumed: they count as ``given`` in the summary)."""
    at = max(0, min(at, len(steps)))
    given = tuple(Result(s, "given") for s in steps[:at])
    state = State(drill, tuple(steps), settings, index=at, results=given)
    if at >= len(steps):
        return replace(state, index=max(len(steps) - 1, 0), done=True), [Summary(given, "done")]
    state = _begin(state)
    return state, drill.opening(state, None) + [_prompt(state)]


def handle(state: State[Q], event: Event) -> tuple[State[Q], list[Effect]]:
    """The next state and the effects of ``event``.  A finished state ignores every event."""
    if state.done:
        return state, []
    if isinstance(event, Interrupt):
        return _finish(state, "interrupt")
    if isinstance(event, EndOfInput):
        effects: list[Effect] = []
        if state.pasted:  # a printout whose brackets never closed: read as it is (refused, saying which)
            state, read = _whole(replace(state, pasted=""), state.pasted)
            effects = [e for e in read if not isinstance(e, (Opening, Prompt, Summary))]
            if state.done:
                return state, effects + [Summary(state.results, "done")]
        if state.rows:  # a script that ends without the blank line after its last row
            state, graded = _grade(state, state.rows, _rows_text(state.rows))
            effects += [e for e in graded if not isinstance(e, (Opening, Prompt, Summary))]
            if state.done:
                return state, effects + [Summary(state.results, "done")]
        state, end = _finish(state, "end")
        return state, effects + end
    if isinstance(event, Command):
        return _command(state, event.name)
    if state.settings.mode == "entry":
        return _entry(state, event.text)
    if state.settings.mode == "row":
        return _row(state, event.text)
    return _matrix(state, event.text)


# --- commands ---------------------------------------------------------------------------------


def _command(state: State[Q], name: str) -> tuple[State[Q], list[Effect]]:
    step = state.step
    if name == "quit":
        return _finish(state, "quit")
    if name == "help":
        return state, [Help(state.settings.mode), _prompt(state)]
    if name == "shape":
        return state, [ShapeInfo(step), _prompt(state)]
    if name == "hint":
        level = state.hints + 1
        state = replace(state, hints=level)
        if level == 1:
            return state, [Hint(step, 1, formula=state.drill.formula(step)), _prompt(state)]
        if level == 2:
            cell, work = state.drill.worked(state)
            return state, [Hint(step, 2, cell=cell, work=work), _prompt(state)]
        return state, [Hint(step, level), _prompt(state)]
    outcome: Literal["shown", "skipped"] = "shown" if name == "show" else "skipped"
    shown: Effect = Reveal(step) if outcome == "shown" else Skipped(step)
    result = Result(step, outcome, state.attempts, state.hints, state.diagnoses)
    return _advance(state, result, _record(state, outcome, state.attempts + 1) + [shown])


# --- the forms of an answer ----------------------------------------------------------------------


def _matrix(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    if state.pasted:
        return _pasting(state, text)
    if not state.rows:
        if not text.strip():
            return state, [_prompt(state)]
        stripped = text.strip()
        if printout_begins(stripped):  # tensor([[1., 1.],  array([[...  [[[...  or a first row that runs on
            return replace(state, pasted=text), [_prompt(replace(state, pasted=text))]
        if stripped.startswith("[[") and "]]" not in stripped:  # the first line of a pasted [[...],\n [...]]
            return _add_row(state, stripped[1:])
        return _whole(state, text)
    if not text.strip():
        return _grade(state, state.rows, _rows_text(state.rows))
    return _add_row(state, text)


def _whole(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    """A whole matrix in ``text`` (on one line, or a printout pasted over several); one row of a taller
    step begins row-by-row input."""
    try:
        if (wide := _too_wide(state, entry_counts(text))) is not None:
            return state, [Invalid(wide), _prompt(state)]
        m = parse_matrix(text)
    except AnswerError as err:
        return state, [Invalid(str(err)), _prompt(state)]
    if len(m) == 1 and state.step.shape[0] > 1:
        state = replace(state, rows=m)
        return state, [RowByRow(len(m)), _prompt(state)]
    return _grade(state, m, text.strip())


def _pasting(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    """One more line of a printout pasted over several: read whole once its brackets close.  A blank
    line goes on only where a batch's printout has one (after ``]],``); elsewhere it ends the paste,
    which is then read as it is (an unclosed bracket is named)."""
    pasted = state.pasted + "\n" + text
    if not text.strip() and not state.pasted.rstrip().endswith(("]],", "]]")):
        return _whole(replace(state, pasted=""), state.pasted)
    if printout_open(pasted) and len(pasted) <= MAX_MATRIX_CHARS:
        return replace(state, pasted=pasted), [_prompt(replace(state, pasted=pasted))]
    return _whole(replace(state, pasted=""), pasted)


def _add_row(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    """One more row of a row-by-row answer; a row ending in ``]]`` ends the matrix."""
    number = len(state.rows) + 1
    stripped = text.strip()
    ends = stripped.endswith("]]")
    if ends:
        stripped = stripped[:-1]
    try:
        (found,) = entry_counts(stripped, one_row=True)  # the width, before any entry is read
        if state.rows and found != len(state.rows[0]):
            message = t("matrix.ragged", row=number, found=found, expected=len(state.rows[0]))
            return state, [Invalid(message), _prompt(state)]
        if (wide := _too_wide(state, [found], number)) is not None:
            return state, [Invalid(wide), _prompt(state)]
        row = parse_row(stripped)
    except AnswerError as err:
        return state, [Invalid(t("practice.bad_row", row=number, message=str(err))), _prompt(state)]
    state = replace(state, rows=state.rows + (row,))
    if ends or len(state.rows) == state.step.shape[0]:  # the last row: graded at once, no empty line needed
        return _grade(state, state.rows, _rows_text(state.rows))
    effects: list[Effect] = [RowByRow(len(state.rows))] if number == 1 else []
    return state, effects + [_prompt(state)]


def _entry(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    if not text.strip():
        return state, [_prompt(state)]
    i, j = state.todo[0]
    try:
        entry = parse_entry(text)
    except AnswerError as err:
        row, col = state.drill.entry_name(state.step, (i, j))
        return state, [Invalid(t("practice.bad_entry", row=row, col=col, message=str(err))), _prompt(state)]
    grid = tuple(tuple(entry if (r, c) == (i, j) else e for c, e in enumerate(row)) for r, row in enumerate(state.grid))
    state = replace(state, grid=grid, todo=state.todo[1:])
    if state.todo:
        return state, [_prompt(state)]
    answered: Answered = tuple(tuple(e for e in row if e is not None) for row in grid)
    return _grade(state, answered, _rows_text(answered))


def _row(state: State[Q], text: str) -> tuple[State[Q], list[Effect]]:
    """One row on one line; a line of another number of entries is not an answer."""
    if not text.strip():
        return state, [_prompt(state)]
    try:
        (found,) = entry_counts(text, one_row=True)  # the width, before any entry is read
        if found != state.step.shape[1]:
            return state, [Invalid(state.drill.miscount(state.step, found)), _prompt(state)]
        row = parse_row(text)
    except AnswerError as err:
        return state, [Invalid(str(err)), _prompt(state)]
    return _grade(state, (row,), _rows_text((row,)))


def _too_wide(state: State[Q], counts: Sequence[int], first: int = 1) -> str | None:
    """The sentence for the first row (numbered from ``first``) wider than any answer to the step is read
    (:meth:`Drill.widest`), or ``None``."""
    widest = state.drill.widest(state.step)
    for number, found in enumerate(counts, start=first):
        if found > widest:
            rows, cols = state.step.shape
            return t("practice.too_wide", row=number, found=found, rows=rows, cols=cols)
    return None


def _rows_text(rows: Answered) -> str:
    return "; ".join(", ".join(e.text for e in row) for row in rows)


# --- grading -----------------------------------------------------------------------------------


def _grade(state: State[Q], answer: Answered, text: str) -> tuple[State[Q], list[Effect]]:
    """Grade a complete answer by the one rule (:func:`.grading.grade`): right, wrong (explained by the
    client's diagnosis), or written too coarsely -- then nothing is recorded and the coarse entries are
    asked again."""
    step = state.step
    attempt = state.attempts + 1
    g = grade(step.exact, answer, state.settings.tolerance, state.drill.strict(step))
    if g.right:
        result = Result(step, "correct", state.attempts, state.hints, state.diagnoses)
        return _advance(state, result, _record(state, "correct", attempt, answer=text) + [Correct(step, attempt)])
    if g.wrong == ():  # only entries too coarse: neither right nor wrong, nothing recorded
        state = _retry(replace(state, rows=()), answer, g.coarse)
        return state, [Coarse(step, answer, g.coarse, state.todo), _prompt(state)]
    diagnoses, alike = state.drill.diagnose(state, answer, g)
    if diagnoses and (g.truncated or g.rounded_away):  # a decimal a named mistake explains was rounded from its value
        explained = _explained(diagnoses, answer, state.settings.tolerance)
        g = replace(g, truncated=tuple(c for c in g.truncated if c not in explained),
                    rounded_away=tuple(c for c in g.rounded_away if c not in explained))
    notes = ((TRUNCATED,) if g.truncated else ()) + ((ROUNDED_AWAY,) if g.rounded_away else ())
    from tutor.mistakes.diagnose import group_key  # here: the machine's clients load the catalogue, not the machine

    # one answer, one mistake: the first diagnosis and those it cannot be told apart from, as one key
    mistake = group_key([d.key for d in diagnoses[:alike]]) if diagnoses else None
    record = _record(state, "wrong", attempt, diagnoses=(mistake,) if mistake else (), notes=notes, answer=text)
    keys = state.diagnoses + ((mistake,) if mistake and mistake not in state.diagnoses else ())
    state = replace(state, attempts=attempt, diagnoses=keys, last_wrong=g.wrong or (), rows=())
    if state.settings.mode == "entry":
        assert g.wrong is not None  # entry mode always answers the question's shape
        state = _retry(state, answer, g.wrong + g.coarse)
    wrong = Wrong(step, answer, g.wrong, g.inexact, diagnoses, attempt, state.todo, g.blocked, alike, g.coarse,
                  g.truncated, g.rounded_away)
    return state, record + [wrong, _prompt(state)]


def _explained(found: Sequence[Diagnosis], answer: Answered, tolerance: float | None) -> set[Cell]:
    """The cells of ``answer`` one of the mistakes ``found`` explains (:func:`tutor.mistakes.diagnose.explained_cells`)."""
    import numpy as np

    from tutor.answers import claim as claim_of
    from tutor.mistakes.diagnose import Claim, explained_cells

    bounds = [[claim_of(e, tolerance=tolerance) for e in row] for row in answer]
    return explained_cells(found, Claim(np.array([[b[0] for b in row] for row in bounds], dtype=np.float64),  # [r, c]
                                        np.array([[b[1] for b in row] for row in bounds], dtype=np.float64)))


def _retry(state: State[Q], answer: Answered, cells: Sequence[Cell]) -> State[Q]:
    """Entry mode: ask ``cells`` again (in order), keeping the other entries of ``answer``."""
    if state.settings.mode != "entry":
        return state
    todo = tuple(sorted(cells))
    bad = set(todo)
    grid = tuple(tuple(None if (i, j) in bad else e for j, e in enumerate(row)) for i, row in enumerate(answer))
    return replace(state, grid=grid, todo=todo)


def _record(state: State[Q], outcome: Outcome, attempt: int, *,
            diagnoses: tuple[str, ...] = (), notes: tuple[str, ...] = (), answer: str | None = None) -> list[Effect]:
    """The effect that saves this try, if the client records one."""
    record = state.drill.attempt(state, outcome, attempt, diagnoses=diagnoses, notes=notes, answer=answer)
    return [] if record is None else [record]


# --- moving on --------------------------------------------------------------------------------------


def _begin(state: State[Q]) -> State[Q]:
    """Reset the per-question fields for the question at ``state.index``."""
    rows, cols = state.step.shape
    state = replace(state, attempts=0, hints=0, diagnoses=(), last_wrong=(), rows=(), pasted="", grid=(), todo=())
    if state.settings.mode == "entry":
        state = replace(state, grid=tuple((None,) * cols for _ in range(rows)),
                        todo=tuple((i, j) for i in range(rows) for j in range(cols)))
    return state


def _advance(state: State[Q], result: Result[Q], effects: list[Effect]) -> tuple[State[Q], list[Effect]]:
    """``result`` ends the current question: on to the next one, or the summary after the last."""
    state = replace(state, results=state.results + (result,))
    if state.index + 1 >= len(state.steps):
        state = replace(state, done=True)
        return state, effects + [Summary(state.results, "done")]
    before = state.step
    state = _begin(replace(state, index=state.index + 1))
    return state, effects + state.drill.opening(state, before) + [_prompt(state)]


def _finish(state: State[Q], reason: Literal["done", "quit", "end", "interrupt"]) -> tuple[State[Q], list[Effect]]:
    """End the session: what is half typed is dropped; the question on screen keeps its tries and hints."""
    current = Result(state.step, None, state.attempts, state.hints, state.diagnoses, seen=True)
    results = state.results + (current,) + tuple(Result(s) for s in state.steps[state.index + 1:])
    state = replace(state, done=True, results=results, rows=(), pasted="", todo=(), grid=())
    return state, [Summary(results, reason)]


def _prompt(state: State[Q]) -> Prompt[Q]:
    multi_head = state.drill.multi_head
    if state.settings.mode == "entry" and state.todo:
        return Prompt(state.step, multi_head, cell=state.todo[0])
    if state.rows:
        return Prompt(state.step, multi_head, row=len(state.rows) + 1)
    return Prompt(state.step, multi_head, more=bool(state.pasted))
