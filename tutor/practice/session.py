"""A practice session: read a line, feed the quiz, carry out its effects, record every answer.

The library below ``attn-tutor practice`` and ``stats``; the commands in
:mod:`tutor.cli.practice` parse options and call these.  Everything a session
touches is passed in (rich's ``Prompt(stream=...)`` idea): the stream answers
are read from, the :class:`rich.console.Console` it writes to, the open
:class:`tutor.store.Store`, and a ``report`` callable for the one error
that must reach stderr while another error ends the session.  The state machine itself is the
pure :mod:`tutor.practice`; this module is the loop around it.

A session reads one line at a time (a terminal, with line editing, or any
piped text: one answer per line), turns it into an event, and carries out the
effects -- each :class:`tutor.store.attempt.Attempt` committed to the progress store
before the feedback after it is shown.  Ctrl-C and the end of input end the
session with its summary.  Ctrl-C does so at any moment of the session -- at
the prompt, while an answer is graded (that answer is dropped, every one
graded before it is saved), while feedback is shown -- and a write to the
store is never cut in half (:func:`deferred_interrupt`).  It does so however the process was started:
a background job of a non-interactive shell (``make test &``, ``nohup``)
starts with SIGINT ignored, so :func:`practise` installs Python's own SIGINT
handler for the duration of the session and restores the one it found.

An answer the store cannot take (the file locked by another program past the
busy timeout, a full disk) does not end the session: a one-line warning says
it is not saved yet, and a :class:`tutor.store.Recorder` keeps it and writes
it with a later answer or at the end.  When a write finds the file damaged,
nothing more is written to it and the warning says so (the session goes on).
Only when some answers still cannot be written at the end does the session
end with a :class:`tutor.base.errors.StoreError` naming how many, after its
summary, which marks each answer not saved.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..base.errors import InputClosedError, StoreError
from ..base.messages import plural, t

if TYPE_CHECKING:
    from rich.console import Console

    from ..exercise.record import Exercise
    from ..render.quiz import QuizRenderer
    from ..store import Recommendation, Recorder, Stats, Store
    from . import Effect, Settings, State
    from .plan import Plan


# --- before a session ----------------------------------------------------------------------


def answer_stream(stream: TextIO | None) -> TextIO:
    """``stream`` as the stream answers are read from; :class:`InputClosedError` when it is closed (``<&-``)."""
    if stream is None or getattr(stream, "closed", False):
        raise InputClosedError(t("practice.stdin_closed"))
    return stream


def step_kinds(ex: Exercise) -> set[str]:
    """The step ids an exercise has, without solving it (the catalogue's rules)."""
    from ..steps import CATALOGUE

    return {k.id for k in CATALOGUE if k.exists(ex) and not k.backward}  # the backward pass only when asked for


def recommendation(store: Store | None, folders: Sequence[Path] = ()) -> tuple[Stats, Recommendation | None]:
    """The learner's stats (empty without a ``store``) and the exercise that trains their weakest step.

    The candidates are the bundled exercises and those of ``folders`` (and
    ``ATTN_TUTOR_PATH``); ``None`` when there is none.
    """
    from ..exercise.catalog import exercises
    from ..store import Stats, recommend

    stats = store.stats() if store is not None else Stats()
    return stats, recommend(stats, [(ex.id, step_kinds(ex), ex.difficulty) for ex in exercises(folders)])


def heads_by_id(folders: Sequence[Path] = ()) -> dict[str, int]:
    """The number of heads of every exercise found (bundled, packs), by id."""
    from ..exercise.catalog import exercises

    return {ex.id: ex.num_heads for ex in exercises(folders)}


def why_picked(rec: Recommendation) -> str:
    """The sentence that opens a session whose exercise was picked by :func:`recommendation`."""
    why = (t("stats.next.weak", step=rec.step, right=rec.stats.correct, graded=rec.stats.graded)
           if rec.stats.graded else t("stats.next.new", step=rec.step))
    return t("practice.picked", exercise=rec.exercise, why=why)


# --- a session -----------------------------------------------------------------------------


@contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises :class:`KeyboardInterrupt` inside the block, whatever SIGINT's disposition was.

    A process started as a background job of a non-interactive shell has
    SIGINT ignored, so Python never installed its handler and Ctrl-C at the
    prompt would do nothing.  The previous handler is restored on the way
    out.  Outside the main thread (where no handler can be set) this does
    nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which cannot be put back from here
            signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Ctrl-C inside the block takes effect as it ends (:class:`KeyboardInterrupt` then): a write to the
    store and the note that it was written happen both or neither, so no answer is lost or saved twice.

    Outside the main thread (where no handler can be set) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def practise(plan: Plan, settings: Settings, *, store: Store, stream: TextIO, console: Console,
             report: Callable[[str], None]) -> State:
    """Run the practice session ``plan`` (:mod:`tutor.practice.plan`) to its end; returns the final quiz state.

    The session and each answer are recorded in ``store`` (open, left open),
    under ``plan``'s selection (so that an interrupted session can be
    resumed) and marked complete when every step asked was finished.  Raises
    :class:`StoreError` after the summary when answers could not be saved by
    the end; when another error breaks the session off, what is still waiting
    is saved if it can be, else ``report`` gets the sentence saying how many
    answers are lost, and the error goes on.
    """
    from ..mistakes.invisible import notes
    from ..render.quiz import QuizRenderer
    from ..store import Recorder
    from . import Interrupt, handle, select, start

    sol = plan.sol
    total = len(select(sol, plan.steps, plan.head)) - plan.begin_at
    renderer = QuizRenderer(console)
    renderer.notes = notes(sol)  # said after a right answer at a step whose check cannot catch a core mistake
    with ctrl_c_interrupts():
        state, effects = start(sol, settings, steps=plan.steps, head=plan.head, begin_at=plan.begin_at,
                               record_as=plan.exercise_id)
        try:  # from here on, Ctrl-C at any moment ends the session with its summary
            with deferred_interrupt():
                session = store.begin_session(plan.exercise_id, mode=settings.mode, tolerance=settings.tolerance,
                                              steps=plan.steps_key, head=plan.head, begin_at=plan.begin_at)
                recorder = Recorder(store, session)
            renderer.intro(sol.exercise, total, settings, plan.opening)
        except KeyboardInterrupt:
            console.print()
            state, effects = handle(state, Interrupt())
        finished = False
        try:
            state = drive(state, effects, renderer, recorder, stream, console)  # flushes at the summary
            finished = True
        finally:
            with deferred_interrupt():
                if not recorder.flush() and not finished:  # broken off by another error: still save what is
                    unsaved = plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder))
                    report(unsaved)  # waiting, and never lose it silently
                if not recorder.pending:
                    try:  # recorder.session: a new id if the file was made again
                        store.end_session(recorder.session, complete=finished and _complete(state))
                    except StoreError:  # only the end time is lost: the session reads as one that was killed
                        pass
    if recorder.pending:
        raise StoreError(plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder)))
    return state


def _complete(state: State) -> bool:
    """Whether every step of a finished session was given or finished (right, shown, skipped)."""
    return state.done and all(r.outcome is not None for r in state.results)


def why_unsaved(recorder: Recorder) -> str:
    """Why the recorder's answers are waiting, as a clause (no advice to try again: they are retried)."""
    err = recorder.error
    return str(getattr(err, "reason", None) or err)


def _prepare(stream: TextIO) -> None:
    """Undecodable bytes in piped input become U+FFFD (then a parse error), never a crash."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="replace")
        except (ValueError, OSError):  # pragma: no cover - a stream that cannot change
            pass


def reading(stream: TextIO) -> bool:
    """Make ``stream`` ready to read answers from; whether it is the terminal (read with ``input()``,
    line editing and history) rather than piped text (undecodable bytes then read as U+FFFD)."""
    interactive = stream is sys.stdin and stream.isatty()
    if interactive:
        try:  # input() gets line editing and history only once readline is loaded
            import readline  # noqa: F401
        except ImportError:  # pragma: no cover - Windows without pyreadline
            pass
    else:
        _prepare(stream)
    return interactive


def read_line(prompt: str, stream: TextIO, out: Console, echo: Callable[[str, str], None],
              interactive: bool) -> str | None:
    """One line typed after ``prompt`` (without its line ending), ``None`` at the end of input.

    From the terminal with ``input()``; from anything else with ``stream.readline()``, the line
    then shown after its prompt by ``echo(prompt, line)`` so that a transcript reads as typed."""
    if interactive:
        from rich.text import Text

        try:
            return out.input(Text(prompt))
        except EOFError:
            out.print()
            return None
    out.print(prompt, end="", markup=False, highlight=False)
    out.file.flush()
    line = stream.readline()
    if line == "":
        out.print()
        return None
    line = line.rstrip("\r\n")
    echo(prompt, line)
    return line


def drive(state: State, effects: Sequence[Effect], renderer: QuizRenderer, recorder: Recorder,
          stream: TextIO, out: Console) -> State:
    """Run a session to its end: carry out ``effects``, read the next line, repeat.

    From a terminal that is ``sys.stdin``, lines are read with ``input()``
    (line editing); from anything else with ``stream.readline()``, echoing
    each line after its prompt so that the transcript reads as typed.  Every
    answer (an :class:`~tutor.store.attempt.Attempt` effect) goes to ``recorder``;
    one it cannot write yet gets a warning and stays in it.  Returns the final state.
    """
    from ..store.attempt import Attempt
    from . import EndOfInput, Event, Interrupt, Prompt, Summary, handle, read_event

    interactive = reading(stream)
    while True:
        waiting = list(effects)  # the effects not carried out yet: on Ctrl-C, the answers among them are saved
        try:
            prompt = None
            while waiting:
                effect = waiting[0]
                if isinstance(effect, Attempt):
                    with deferred_interrupt():  # saved and taken off the list together
                        waiting.pop(0)
                        saved = recorder.add(effect)
                    if recorder.notice is not None:  # the file was deleted or replaced: say where the answers are
                        renderer.line(recorder.notice, "bold yellow")
                        recorder.notice = None
                    if not saved:
                        renderer.unsaved_warning(why_unsaved(recorder), lost=recorder.lost)
                    continue
                waiting.pop(0)
                if isinstance(effect, Prompt):
                    prompt = effect
                else:
                    if isinstance(effect, Summary):  # the last chance to save what is still waiting
                        with deferred_interrupt():
                            recorder.flush()
                        if recorder.notice is not None:
                            renderer.line(recorder.notice, "bold yellow")
                            recorder.notice = None
                        renderer.unsaved = tuple(recorder.pending)
                    renderer.show(effect)
            if state.done or prompt is None:
                return state
            line = read_line(renderer.prompt(prompt), stream, out, renderer.echo, interactive)
            event: Event = EndOfInput() if line is None else read_event(line)
            state, effects = handle(state, event)  # grading: Ctrl-C here drops the answer being graded
        except KeyboardInterrupt:
            out.print()
            for effect in waiting:  # answered (graded) before the Ctrl-C: saved like the others
                if isinstance(effect, Attempt):
                    with deferred_interrupt():
                        recorder.add(effect)
            state, effects = handle(state, Interrupt())


# --- stats ---------------------------------------------------------------------------------


def mistake_name(key: str) -> str:
    """What a mistake's key is called where it is counted (``mistake.<key>``); the key itself
    for one the catalogue does not name (a misconception added without its name)."""
    from ..base.messages import EN

    return t(f"mistake.{key}") if f"mistake.{key}" in EN else key


def stats_document(data: Stats, rec: Recommendation | None, path: str,
                   heads: dict[str, int] | None = None) -> dict[str, Any]:
    """The stats as plain data: what ``stats --format json`` prints and the terminal view renders.

    ``{"store", "sessions", "answers", "steps", "mistakes", "due_now", "next", "left_out"}``:

    * ``steps``: per step kind practised, ``{"step", "correct", "wrong",
      "shown", "skipped", "first_try", "graded", "accuracy", "due",
      "retention", "skills"}`` -- ``due`` the next review of the step (the
      soonest of its skills: ISO 8601, UTC), ``retention`` the recall the
      scheduler predicts now (the lowest of its skills, 0 to 1), both ``null``
      before any review; ``skills`` one ``{"family", "due", "retention",
      "reviews"}`` per exercise family it was reviewed in;
    * ``mistakes``: the most frequent mistakes by key, ``{"key", "kind",
      "name", "count", "where": [{"exercise", "step", "head", "heads", "count"}]}``
      (``kind`` is ``diagnosis`` or ``grading``; ``head`` is 0-based, as in
      every JSON document, ``null`` for a layer step; ``heads`` the number of
      heads of the exercise, from ``heads`` (id -> heads), ``null`` when unknown);
    * ``due_now``: the skills due for review, ``{"step", "family", "due"}``;
    * ``next``: ``{"step", "exercise", "correct", "graded", "accuracy",
      "command"}`` or ``null``.

    Accuracies and retentions are rounded to 4 places (``None`` before any graded answer).
    ``left_out`` is the number of rows of the file that are not as attn-tutor
    writes them (a value of another type), left out of every count.
    """
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    by_step: dict[str, list[Any]] = {}
    for sk in data.skills:
        by_step.setdefault(sk.step, []).append(sk)
    steps = []
    for s in data.steps:
        skills = sorted(by_step.get(s.step, ()), key=lambda k: k.family)
        steps.append({
            "step": s.step, "correct": s.correct, "wrong": s.wrong, "shown": s.shown, "skipped": s.skipped,
            "first_try": s.first_try, "graded": s.graded,
            "accuracy": None if s.accuracy is None else round(s.accuracy, 4),
            "due": min(k.due for k in skills).isoformat() if skills else None,
            "retention": round(min(k.retention for k in skills), 4) if skills else None,
            "skills": [{"family": k.family, "due": k.due.isoformat(), "retention": round(k.retention, 4),
                        "reviews": k.reviews} for k in skills],
        })
    mistakes = [{"key": m.key, "kind": m.kind, "name": mistake_name(m.key), "count": m.count,
                 "where": [{"exercise": p.exercise, "step": p.step, "head": p.head,
                            "heads": (heads or {}).get(p.exercise), "count": p.count} for p in m.places]}
                for m in data.mistakes]
    nxt = None
    if rec is not None:
        nxt = {"step": rec.step, "exercise": rec.exercise, "correct": rec.stats.correct, "graded": rec.stats.graded,
               "accuracy": None if rec.stats.accuracy is None else round(rec.stats.accuracy, 4),
               "command": f"attn-tutor practice {rec.exercise}"}
    return {
        "store": path,
        "sessions": data.sessions,
        "answers": data.answers,
        "steps": steps,
        "mistakes": mistakes,
        "due_now": [{"step": k.step, "family": k.family, "due": k.due.isoformat()} for k in data.skills
                    if k.is_due(now)],
        "next": nxt,
        "left_out": data.left_out,
    }
