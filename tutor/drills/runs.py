"""A drill run from start to end, with the progress store: what ``attn-tutor drill …`` calls.

As :func:`tutor.practice.session.practise` does for practice: the store is opened
before the first question (a damaged or foreign progress file stops the run
there, exit code 2), every answer goes through a :class:`tutor.store.Recorder`
(an answer the file cannot take yet is kept and written later), Ctrl-C
raises :class:`KeyboardInterrupt` wherever the process was started
(:func:`tutor.practice.terminal.ctrl_c_interrupts`) and ends the run with its summary,
and answers still unsaved at the end are a :class:`tutor.base.errors.StoreError`
after the summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from time import monotonic  # the clock of a timed run (a module attribute: tests replace it)
from typing import TYPE_CHECKING, TextIO, TypeVar

from ..base.errors import StoreError
from ..base.messages import plural
from .record import DRILL_PREFIX, Question

if TYPE_CHECKING:
    from ..store import Recorder
    from .bank import Bank
    from .driver import Run, View
    from .interview import InterviewView, Plan, Report


def new_seed() -> int:
    """A fresh seed for a run without ``--seed`` (shown at its start, so it can be repeated)."""
    import secrets

    return secrets.randbelow(10**6)


def drill(name: str, questions: Sequence[Question], *, seed: int, mode: str, stream: TextIO, view: View, store: Path,
          report: Callable[[str], None]) -> Run:
    """Ask ``questions`` of drill ``name`` on ``stream``, record them in the progress store at ``store``,
    show the summary on ``view``; returns the run.

    ``report`` gets the sentence saying how many answers are lost when another
    error breaks the run off and they cannot be saved."""
    from ..practice.terminal import Lines
    from .driver import ask

    def body(recorder: Recorder) -> Run:
        view.intro(name, len(questions), seed, mode)
        result = ask(questions, lines=Lines(stream, view.console, view.echo), view=view, recorder=recorder)
        recorder.flush()
        view.summary(result, len(recorder.pending))
        return result

    return _recorded(store, f"{DRILL_PREFIX}{name}", mode, body, report)


def interview(p: Plan, *, minutes: float, bank: Bank, stream: TextIO, view: InterviewView, store: Path,
              report: Callable[[str], None], clock: Callable[[], float] | None = None) -> Report:
    """Run the mock interview ``p``, recorded in the progress store at ``store``, and show its report;
    returns the report.

    ``clock`` gives seconds (default :func:`time.monotonic`, looked up at each run)."""
    from . import interview as mock

    def body(recorder: Recorder) -> Report:
        result = mock.run(p, minutes=minutes, stream=stream, view=view, recorder=recorder,
                          bank=bank, clock=clock or monotonic)
        recorder.flush()
        view.report(result, len(recorder.pending))
        return result

    return _recorded(store, f"{DRILL_PREFIX}interview", "interview", body, report)


T = TypeVar("T")


def _recorded(path: Path, exercise: str, mode: str, body: Callable[[Recorder], T], report: Callable[[str], None]) -> T:
    """Open the store at ``path``, begin a session, run ``body`` with its recorder under Ctrl-C handling, end
    the session.

    Raises :class:`StoreError` after ``body`` when answers are still unsaved;
    when another error breaks ``body`` off, what is waiting is saved if it
    can be, else ``report`` says how many answers are lost."""
    from ..practice.terminal import ctrl_c_interrupts
    from ..store import Recorder, Store
    from ..store.recorder import why_unsaved

    store = Store.open(path)  # a damaged, foreign or read-only store stops here, before any question
    try:
        with ctrl_c_interrupts():
            session = store.begin_session(exercise, mode=mode, tolerance=0.0)
            recorder = Recorder(store, session)
            finished = False
            try:
                result = body(recorder)
                finished = True
            finally:
                if not finished and not recorder.flush():
                    report(plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder)))
                if not recorder.pending:
                    try:
                        store.end_session(recorder.session)  # a new id if the file was made again
                    except StoreError:  # only the end time is lost: the run reads as one that was killed
                        pass
        if recorder.pending:
            raise StoreError(plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder)))
        return result
    finally:
        store.close()
