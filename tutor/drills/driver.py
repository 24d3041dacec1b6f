"""Asking a drill's questions: read a line, grade it, show the verdict, record the answer, repeat.

Everything a run touches is passed in, as for a practice session
(:mod:`tutor.practice.session`): the :class:`~tutor.practice.terminal.Lines` it
reads answers from (a terminal with line editing, or any stream, each line
echoed after its prompt), the :class:`View` it writes to (the command line passes
:class:`tutor.render.drill.DrillView`), the
:class:`tutor.store.Recorder` every answer goes to, and the clock a timed run
reads (``time.monotonic`` by default; tests pass a fake one, and nothing here
ever sleeps).

At the prompt, besides an answer: ``hint``, ``show`` (reveal the answer: a
miss), ``skip`` (not counted), ``quit``, ``help``.  A free-text answer is
followed by one yes/no question per key point: the learner grades
themselves.  The end of input, ``quit``, Ctrl-C and, in a timed run, the
end of the time end the run; the caller shows its summary.  Every answer
is recorded before its verdict is shown, as in practice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ..base.halfwidth import halfwidth
from ..practice.terminal import Lines, deferred_interrupt
from ..store.attempt import Attempt
from ..store.recorder import why_unsaved
from .record import DRILL_PREFIX, MAX_ANSWER_CHARS, Question, Verdict, grade

if TYPE_CHECKING:
    from rich.console import Console

    from ..store import Recorder

Reason = Literal["done", "quit", "end", "interrupt", "time"]
Answer = Literal["correct", "wrong", "shown", "skipped"]
COMMANDS = ("hint", "show", "skip", "quit", "help")
YES, NO = ("y", "yes", "是", "对"), ("n", "no", "否", "不")  # and the Chinese a learner may answer with


@dataclass(frozen=True)
class Answered:
    """How one question went: its ``outcome`` (``None``: not reached or left unanswered), the hints
    taken, the key points the learner says they hit (free text), the text typed and the verdict."""

    question: Question
    outcome: Answer | None = None
    hints: int = 0
    points: tuple[bool, ...] = ()
    text: str | None = None
    verdict: Verdict | None = None


@dataclass(frozen=True)
class Run:
    """A finished run: every question's :class:`Answered` in order, and why it ended."""

    results: tuple[Answered, ...]
    reason: Reason

    @property
    def answered(self) -> tuple[Answered, ...]:
        """The questions that got an outcome that counts (right, wrong or shown)."""
        return tuple(r for r in self.results if r.outcome in ("correct", "wrong", "shown"))


class View(Protocol):
    """What a drill shows its run on: one method per moment (the drills ask and grade, never render)."""

    console: Console

    def echo(self, prompt: str, line: str) -> None: ...
    def intro(self, drill: str, total: int, seed: int, mode: str = "") -> None: ...
    def question(self, q: Question, number: int, total: int, left: float | None, *, follow_up: bool = False) -> None: ...
    def prompt(self, q: Question) -> str: ...
    def yes_no_prompt(self) -> str: ...
    def help(self, q: Question) -> None: ...
    def hint(self, q: Question, level: int) -> None: ...
    def invalid(self, message: str, q: Question) -> None: ...
    def invalid_yes_no(self) -> None: ...
    def verdict(self, q: Question, v: Verdict) -> None: ...
    def reveal(self, q: Question, *, shown: bool) -> None: ...
    def key_points_intro(self, n: int) -> None: ...
    def key_point(self, i: int, n: int, text: str) -> None: ...
    def model_answer(self, q: Question, points: Sequence[bool]) -> None: ...
    def unsaved_warning(self, reason: str, lost: bool = False) -> None: ...
    def summary(self, run: Run, unsaved: int = 0) -> None: ...


class Stop(Exception):
    """The run ends here (``quit``, end of input, time); ``reason`` says which."""

    def __init__(self, reason: Reason):
        super().__init__(reason)
        self.reason: Reason = reason


def ask(questions: Sequence[Question], *, lines: Lines, view: View, recorder: Recorder | None,
        clock: Callable[[], float] = time.monotonic, deadline: float | None = None) -> Run:
    """Ask ``questions`` in order until the last one, ``quit``, the end of input, Ctrl-C or ``deadline``
    (a time of ``clock``) -- checked before each question, never while one is being answered.

    Each answer is recorded to ``recorder`` (when given) before its verdict
    is shown; one the store cannot take yet gets a warning and stays in the
    recorder.  Returns the :class:`Run`; the caller shows its summary.
    """
    results: list[Answered] = []
    reason: Reason = "done"
    follow = {q.id for q in questions}
    try:
        for n, q in enumerate(questions, start=1):
            if deadline is not None and clock() >= deadline:
                raise Stop("time")
            left = None if deadline is None else deadline - clock()
            view.question(q, n, len(questions), left, follow_up=q.follow_up in follow)
            answered = one(q, lines, view, recorder)
            results.append(answered)
    except Stop as stop:
        reason = stop.reason
    except KeyboardInterrupt:
        view.console.print()
        reason = "interrupt"
    return Run(tuple(results) + tuple(Answered(q) for q in questions[len(results):]), reason)


def one(q: Question, lines: Lines, view: View, recorder: Recorder | None) -> Answered:
    """Ask one question until it has an outcome; :class:`Stop` when the run ends instead."""
    hints = 0
    while True:
        line = lines.read(view.prompt(q))
        if line is None:
            raise Stop("end")
        word = halfwidth(line).strip().lower()  # full-width, as a Chinese input method types it
        if not word:
            continue
        if word == "quit":
            raise Stop("quit")
        if word == "help":
            view.help(q)
            continue
        if word == "hint":
            hints += 1
            view.hint(q, hints)
            continue
        if word in ("skip", "show"):
            answered = Answered(q, "skipped" if word == "skip" else "shown", hints)
            save(answered, recorder, view)
            view.reveal(q, shown=word == "show")
            return answered
        if q.kind == "free":
            answered = self_graded(q, line, hints, lines, view)
            save(answered, recorder, view)
            view.model_answer(q, answered.points)
            return answered
        verdict = grade(q, line)
        if verdict.outcome == "invalid":
            view.invalid(verdict.message, q)
            continue
        answered = Answered(q, "correct" if verdict.outcome == "correct" else "wrong", hints, text=line,
                            verdict=verdict)
        save(answered, recorder, view)
        view.verdict(q, verdict)
        return answered


def self_graded(q: Question, text: str, hints: int, lines: Lines, view: View) -> Answered:
    """Free text: the learner says, key point by key point, whether their answer made it."""
    view.key_points_intro(len(q.key_points))
    points: list[bool] = []
    for i, point in enumerate(q.key_points, start=1):
        view.key_point(i, len(q.key_points), point)
        while True:
            line = lines.read(view.yes_no_prompt())
            if line is None:
                raise Stop("end")
            word = halfwidth(line).strip().lower()  # full-width, as a Chinese input method types it
            if word == "quit":
                raise Stop("quit")
            if word in YES or word in NO:
                points.append(word in YES)
                break
            view.invalid_yes_no()
    outcome: Answer = "correct" if all(points) else "wrong"
    return Answered(q, outcome, hints, tuple(points), text)


def attempt(a: Answered) -> Attempt:
    """The record the progress store keeps for an answered question: under ``drill:<drill>`` and
    step ``drill:<drill>:<topic>``; the diagnoses of a wrong answer (its mistake first, then the slips
    beside it); the text typed (cut to :data:`~tutor.drills.record.MAX_ANSWER_CHARS`)."""
    q = a.question
    assert a.outcome is not None
    v = a.verdict
    diagnoses = (v.diagnosis, *v.also) if v is not None and v.diagnosis and a.outcome == "wrong" else ()
    text = None if a.text is None else a.text[:MAX_ANSWER_CHARS]
    return Attempt(f"{DRILL_PREFIX}{q.drill}", q.step, None, a.outcome, 1, a.hints, diagnoses, text)


def save(a: Answered, recorder: Recorder | None, view: View) -> None:
    """Hand the answer to the store's recorder; warn (and keep it waiting) when it cannot be written yet."""
    if recorder is None:
        return
    with deferred_interrupt():  # Ctrl-C during the write takes effect after it: saved and noted together
        saved = recorder.add(attempt(a))
    if not saved:
        view.unsaved_warning(why_unsaved(recorder), lost=recorder.lost)
