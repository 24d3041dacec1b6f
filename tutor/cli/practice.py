"""`practice` and `stats` (issue 4).

``practice`` drives the pure state machine of :mod:`tutor.quiz`: it reads one
line at a time from a stream (a terminal, with line editing, or any piped
text: one answer per line), turns it into an event, and carries out the
effects -- each :class:`tutor.attempt.Attempt` committed to the progress store
before the feedback after it is shown.  Ctrl-C and the end of input end the
session with its summary and exit code 0.

An answer the store cannot take (the file locked by another program past the
busy timeout, a full disk) does not end the session: a one-line warning says
it is not saved yet, and a :class:`tutor.store.Recorder` keeps it and writes
it with a later answer or at the end.  When a write finds the file damaged,
nothing more is written to it and the warning says so (the session goes on).
Only when some answers still cannot be written at the end does the session
end with an error naming how many (exit code 2), after its summary, which
marks each answer not saved.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from ..errors import InputClosedError, StoreError
from ..messages import t
from . import ExercisesOpt, Format, FormatOpt, app, check_head, console, warn, write_document

if TYPE_CHECKING:
    from rich.console import Console

    from ..exercise.record import Exercise
    from ..quiz import State
    from ..render.quiz import QuizRenderer
    from ..store import Recorder, Store


class PracticeMode(str, Enum):
    matrix = "matrix"
    entry = "entry"


def _answer_stream() -> TextIO:
    """The stream answers are read from: standard input, refused when it is closed."""
    stream = sys.stdin
    if stream is None or getattr(stream, "closed", False):
        raise InputClosedError(t("practice.stdin_closed"))
    return stream


def step_kinds(ex: Exercise) -> set[str]:
    """The step ids an exercise has, without solving it (the catalogue's rules)."""
    from ..steps import CATALOGUE

    return {k.id for k in CATALOGUE if k.exists(ex)}


def _recommend(store: Store | None, folders: Sequence[Path] = ()):  # -> tuple[Stats, Recommendation | None]
    from ..catalog import exercises
    from ..store import Stats, recommend

    stats = store.stats() if store is not None else Stats()
    return stats, recommend(stats, [(ex.id, step_kinds(ex), ex.difficulty) for ex in exercises(folders)])


def _parse_steps(text: str | None) -> list[str] | None:
    from ..steps import STEP_IDS

    if text is None:
        return None
    names = [s.strip().lower() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STEP_IDS]
    if unknown or not names:
        raise typer.BadParameter(t("practice.bad_steps", found=", ".join(unknown) or text, known=", ".join(STEP_IDS)),
                                 param_hint="--steps")
    return names


@app.command(help=t("cli.practice.help"))
def practice(
    exercise: Annotated[str | None, typer.Argument(help=t("cli.practice.exercise"), show_default=False)] = None,
    steps: Annotated[str | None, typer.Option("--steps", help=t("cli.practice.steps"), show_default=False)] = None,
    head: Annotated[int | None, typer.Option("--head", help=t("cli.practice.head"), min=0, show_default=False)] = None,
    mode: Annotated[PracticeMode, typer.Option("--mode", help=t("cli.practice.mode"))] = PracticeMode.matrix,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help=t("cli.practice.tolerance"),
                                                    show_default=False)] = None,
    exercises: ExercisesOpt = None,
) -> None:
    from ..answers import DEFAULT_TOLERANCE
    from ..catalog import resolve
    from ..messages import plural
    from ..quiz import Settings, select, start
    from ..render.quiz import QuizRenderer
    from ..steps import solve
    from ..store import Recorder, Store

    chosen = _parse_steps(steps)
    if tolerance is not None and not 0 < tolerance <= 1e6:  # also refuses nan
        raise typer.BadParameter(t("practice.bad_tolerance", found=tolerance), param_hint="--tolerance")
    stream = _answer_stream()  # before the store is opened: a session that cannot read leaves no trace
    store = Store.open()  # a damaged, foreign or read-only store stops here, before any question
    try:
        picked = ""
        if exercise is None:
            _, rec = _recommend(store, exercises or ())
            if rec is None:
                raise typer.BadParameter(t("practice.no_bundled"), param_hint="EXERCISE")
            exercise = rec.exercise
            why = (t("stats.next.weak", step=rec.step, right=rec.stats.correct, graded=rec.stats.graded)
                   if rec.stats.graded else t("stats.next.new", step=rec.step))
            picked = t("practice.picked", exercise=rec.exercise, why=why)
        ex = resolve(exercise, exercises or ())
        check_head(head, ex.num_heads)
        sol = solve(ex)
        if chosen is not None:
            missing = [s for s in chosen if s not in step_kinds(ex)]
            if missing:
                raise typer.BadParameter(t("practice.missing_steps", steps=", ".join(missing), id=ex.id,
                                           has=", ".join(s.id for s in sol.steps if s.head in (0, None))),
                                         param_hint="--steps")
        settings = Settings(mode.value, tolerance if tolerance is not None else DEFAULT_TOLERANCE)  # type: ignore[arg-type]
        total = len(select(sol, chosen, head))
        out = console()
        renderer = QuizRenderer(out)
        renderer.intro(ex, total, settings, picked)
        state, effects = start(sol, settings, steps=chosen, head=head)
        session = store.begin_session(ex.id, mode=settings.mode, tolerance=settings.tolerance)
        recorder = Recorder(store, session)
        finished = False
        try:
            drive(state, effects, renderer, recorder, stream, out)  # flushes the recorder at the summary
            finished = True
        finally:
            if not finished and not recorder.flush():  # broken off by another error: still save what is waiting,
                unsaved = plural("practice.unsaved.end", len(recorder.pending), reason=_why_unsaved(recorder))
                warn(t("cli.error", message=unsaved))  # and never lose it silently
            if not recorder.pending:
                try:
                    store.end_session(session)
                except StoreError:  # only the end time is lost: the session reads as one that was killed
                    pass
        if recorder.pending:
            raise StoreError(plural("practice.unsaved.end", len(recorder.pending), reason=_why_unsaved(recorder)))
    finally:
        store.close()


def _why_unsaved(recorder: Recorder) -> str:
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


def drive(state: State, effects: list, renderer: QuizRenderer, recorder: Recorder, stream: TextIO,
          out: Console) -> State:
    """Run a session to its end: carry out ``effects``, read the next line, repeat.

    From a terminal, lines are read with ``input()`` (line editing); from
    anything else with ``stream.readline()``, echoing each line after its
    prompt so that the transcript reads as typed.  Every answer (an
    :class:`~tutor.attempt.Attempt` effect) goes to ``recorder``; one it
    cannot write yet gets a warning and stays in it.
    Returns the final state.
    """
    from ..attempt import Attempt
    from ..quiz import EndOfInput, Event, Interrupt, Prompt, Summary, handle, read_event

    interactive = stream is sys.stdin and stream.isatty()
    if interactive:
        try:  # input() gets line editing and history only once readline is loaded
            import readline  # noqa: F401
        except ImportError:  # pragma: no cover - Windows without pyreadline
            pass
    else:
        _prepare(stream)
    while True:
        try:
            prompt = None
            for effect in effects:
                if isinstance(effect, Attempt):
                    saved = recorder.add(effect)
                    if not saved:
                        renderer.unsaved_warning(_why_unsaved(recorder), lost=recorder.lost)
                elif isinstance(effect, Prompt):
                    prompt = effect
                else:
                    if isinstance(effect, Summary):  # the last chance to save what is still waiting
                        recorder.flush()
                        renderer.unsaved = tuple(recorder.pending)
                    renderer.show(effect)
            if state.done or prompt is None:
                return state
            text = renderer.prompt(prompt)
            if interactive:
                from rich.text import Text

                try:
                    line: str | None = out.input(Text(text))
                except EOFError:
                    out.print()
                    line = None
            else:
                out.print(text, end="", markup=False, highlight=False)
                out.file.flush()
                line = stream.readline()
                if line == "":
                    out.print()
                    line = None
                else:
                    line = line.rstrip("\r\n")
                    renderer.echo(text, line)
            event: Event = EndOfInput() if line is None else read_event(line)
        except KeyboardInterrupt:
            out.print()
            event = Interrupt()
        state, effects = handle(state, event)


@app.command(help=t("cli.stats.help"))
def stats(
    fmt: FormatOpt = Format.rich,
) -> None:
    from ..store import Store, default_path

    path = default_path()
    store = Store.open_existing(path)
    try:
        data, rec = _recommend(store)
    finally:
        if store is not None:
            store.close()
    doc = stats_dict(data, rec, str(path))
    if fmt is Format.json:
        import json

        write_document(json.dumps(doc, indent=1))  # ASCII: safe on any stream
        return
    from ..render.quiz import render_stats

    render_stats(doc, console())


def stats_dict(data, rec, path: str) -> dict:
    """The stats as plain data: what ``--format json`` prints and the terminal view renders."""
    steps = [
        {"step": s.step, "correct": s.correct, "wrong": s.wrong, "shown": s.shown, "skipped": s.skipped,
         "first_try": s.first_try, "graded": s.graded,
         "accuracy": None if s.accuracy is None else round(s.accuracy, 4)}
        for s in data.steps
    ]
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
        "diagnoses": [{"key": d.key, "count": d.count, "message": d.message} for d in data.diagnoses],
        "next": nxt,
    }
