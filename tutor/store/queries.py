"""What the store's rows say: the stats, what to practise next, where a session left off, what is done.

The summaries are read with a few queries (:func:`stats`, :func:`unfinished`,
:func:`solved`) and the choices made from them are pure functions
(:func:`recommend`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .attempt import OutcomeCounts
from .scheduling import Skill, skills, unreadable_skills
from .schema import ANSWERS, MISTAKE_AS_WRITTEN, MISTAKES, SESSION_AS_WRITTEN, SKILL_AS_WRITTEN, Rows

Key = tuple[str, "int | None"]  # (step id, 0-based head or None)


@dataclass(frozen=True)
class StepStats(OutcomeCounts):
    """Counts for one step kind (``q``, ``scores``, ...) over every exercise and head."""

    step: str
    correct: int = 0
    wrong: int = 0
    shown: int = 0
    skipped: int = 0
    first_try: int = 0


@dataclass(frozen=True)
class Place:
    """Where a mistake happened: a step (0-based ``head``, ``None`` for a layer step) of an exercise, how often."""

    exercise: str
    step: str
    head: int | None
    count: int


@dataclass(frozen=True)
class MistakeCount:
    """How often a mistake's key matched a wrong answer (``kind``: ``diagnosis`` or ``grading``), and where."""

    key: str
    kind: str
    count: int
    places: tuple[Place, ...]


@dataclass(frozen=True)
class Stats:
    """Everything ``attn-tutor stats`` reports, computed from the store's rows."""

    sessions: int = 0
    answers: int = 0
    steps: tuple[StepStats, ...] = ()
    mistakes: tuple[MistakeCount, ...] = ()
    practised: dict[tuple[str, str], int] = field(default_factory=dict)  # (exercise, step) -> graded answers
    skills: tuple[Skill, ...] = ()
    #: how many different mistakes (key and kind) were made: :attr:`mistakes` holds only the most frequent
    mistake_kinds: int = 0
    #: the drills' answers (:mod:`tutor.drills.results`), counted per step name: ``(step, correct, wrong,
    #: shown, skipped)``; every other field leaves them out
    drill_outcomes: tuple[tuple[str, int, int, int, int], ...] = ()
    #: rows not as attn-tutor writes them (see :data:`.schema.ANSWER_AS_WRITTEN`, and those of
    #: ``mistakes`` and ``skills``): left out of every count
    left_out: int = 0

    def step(self, step: str) -> StepStats:
        """The counts for ``step`` (zeros when never practised)."""
        for s in self.steps:
            if s.step == step:
                return s
        return StepStats(step)


#: Practice statistics leave drill rows out (issue 14): their exercise and step names start with ``drill:``.
PRACTICE_ONLY = "substr(step, 1, 6) != 'drill:'"
PRACTICE_SESSIONS = "substr(exercise, 1, 6) != 'drill:'"


def stats(store: Rows, top: int = 5, at: datetime | None = None) -> Stats:
    """Accuracy by step kind, the ``top`` most frequent mistakes (by key, with where each
    happened), practice per (exercise, step), and the schedule of every skill at ``at``.
    Drill answers (:mod:`tutor.drills.results`) are left out of these, and counted apart
    (:attr:`Stats.drill_outcomes`).  Everything is aggregated in SQL: the memory it takes does not
    grow with the number of answers (``benchmarks/stats_memory.py``).

    Only rows as attn-tutor writes them are counted (:data:`.schema.ANSWER_AS_WRITTEN`: every
    value of the type its column holds; likewise for ``mistakes`` and ``skills``, whose values must
    also lie in the range the scheduler writes, :func:`.scheduling.card_of`); the others -- a
    value another program or a hand edit put there, such as a BLOB for a step or a stability of
    0 -- are left out and counted in :attr:`Stats.left_out`, so that the rest of the progress
    stays usable."""
    (sessions,), = store.read(f"SELECT COUNT(*) FROM sessions WHERE {PRACTICE_SESSIONS}")
    # one scan of the answers, counted in SQL per (exercise, step): a few hundred rows whatever the size
    # of the store, from which the steps, the practice per (exercise, step) and the drills' counts are
    # summed here (never every answer in memory).  The same statement (one snapshot, whoever writes
    # meanwhile) counts every row of the table, NULL for exercise: the answers not as written are the rest.
    counts: dict[str, list[int]] = {}
    practised: dict[tuple[str, str], int] = {}
    drills: dict[str, list[int]] = {}
    read = total = 0
    for exercise, step, correct, wrong, shown, skipped, first in store.read(
            "SELECT exercise, step, SUM(outcome = 'correct'), SUM(outcome = 'wrong'), SUM(outcome = 'shown'),"
            f" SUM(outcome = 'skipped'), SUM(outcome = 'correct' AND attempt = 1) FROM {ANSWERS} GROUP BY exercise, step"
            " UNION ALL SELECT NULL, NULL, COUNT(*), 0, 0, 0, 0 FROM answers"):
        if exercise is None:
            total = correct
            continue
        read += correct + wrong + shown + skipped
        if step[:6] == "drill:":  # not PRACTICE_ONLY: a drill's answer
            d = drills.setdefault(step, [0, 0, 0, 0])
            for i, n in enumerate((correct, wrong, shown, skipped)):
                d[i] += n
            continue
        c = counts.setdefault(step, [0, 0, 0, 0, 0])
        for i, n in enumerate((correct, wrong, shown, skipped, first)):
            c[i] += n
        if correct + wrong + shown:
            practised[(exercise, step)] = correct + wrong + shown
    (left_out,), = store.read(f"SELECT (SELECT COUNT(*) FROM mistakes WHERE NOT ({MISTAKE_AS_WRITTEN}))"
                              f" + (SELECT COUNT(*) FROM skills WHERE NOT ({SKILL_AS_WRITTEN}))")
    left_out += total - read
    left_out += unreadable_skills(store)  # of the right types, but out of the range the scheduler writes
    by_step = {step: StepStats(step, *c) for step, c in counts.items()}
    from ..steps import STEP_IDS  # here, not at the top: `list` reads the store and loads no step catalogue

    order: dict[str, int] = {s: i for i, s in enumerate(STEP_IDS)}
    steps = tuple(sorted(by_step.values(), key=lambda s: (order.get(s.step, len(order)), s.step)))
    places: dict[tuple[str, str], list[Place]] = {}
    for key, kind, exercise, step, head, count in store.read(
            f"SELECT m.key, m.kind, a.exercise, a.step, a.head, COUNT(*) FROM {MISTAKES} m JOIN {ANSWERS} a ON a.id = m.answer"
            f" WHERE {PRACTICE_ONLY.replace('step', 'a.step')} GROUP BY m.key, m.kind, a.exercise, a.step, a.head"):
        places.setdefault((key, kind), []).append(Place(exercise, step, head, count))
    mistakes = sorted(
        (MistakeCount(key, kind, sum(p.count for p in where),
                      tuple(sorted(where, key=lambda p: (-p.count, p.exercise, order.get(p.step, len(order)),
                                                          -1 if p.head is None else p.head))))
         for (key, kind), where in places.items()),
        key=lambda m: (-m.count, m.key))[:top]
    answers = sum(s.graded + s.skipped for s in steps)
    return Stats(sessions, answers, steps, tuple(mistakes), practised, tuple(skills(store, at)), len(places),
                 tuple((step, c[0], c[1], c[2], c[3]) for step, c in sorted(drills.items())), left_out)


# --- what to practise next ------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """What to practise next: the weakest step kind, and an exercise that trains it."""

    step: str
    exercise: str
    stats: StepStats


def recommend(stats: Stats, exercises: Sequence[tuple[str, Iterable[str], int | None]]) -> Recommendation | None:
    """The weakest step kind among those ``exercises`` train, and the exercise to train it on.

    ``exercises`` are ``(id, step kinds it has, difficulty)``.  The weakest
    step has the lowest :attr:`StepStats.score` (ties: earliest in the
    computation); among the exercises that have it, the one least practised on
    that step, then the easiest, then by id.  ``None`` when there are no exercises.
    """
    from ..steps import KINDS, STEP_IDS  # here, not at the top: `list` reads the store and loads no step catalogue

    kinds = {ex_id: set(steps) for ex_id, steps, _ in exercises}
    available = [s for s in STEP_IDS if any(s in k for k in kinds.values())]
    if not available:
        return None
    # ties: the steps of format v2 (a cache, a bias) after the others, then the earliest in the computation
    weakest = min(available, key=lambda s: (stats.step(s).score, KINDS[s].advanced, STEP_IDS.index(s)))
    candidates = [(stats.practised.get((ex_id, weakest), 0), diff if diff is not None else 3, ex_id)
                  for ex_id, _, diff in exercises if weakest in kinds[ex_id]]
    return Recommendation(weakest, min(candidates)[2], stats.step(weakest))


# --- where a session left off ----------------------------------------------------------------------


@dataclass(frozen=True)
class Unfinished:
    """The latest session of a selection, not complete: its id, the 0-based index of its first
    step asked (``begin_at``: the earlier ones were given), and the steps it finished (answered
    right, shown or skipped)."""

    session: int
    begin_at: int
    finished: frozenset[Key]

    def resume_at(self, steps: Sequence[Key]) -> int:
        """The 0-based index, in ``steps`` (the selection's steps in order), of the first step
        neither given nor finished; ``len(steps)`` when every one is."""
        for i, key in enumerate(steps):
            if i >= self.begin_at and key not in self.finished:
                return i
        return len(steps)


def unfinished(store: Rows, exercise: str, *, steps: str | None, head: int | None, mode: str) -> Unfinished | None:
    """The latest session of ``exercise`` with the same ``steps`` (the text
    :meth:`Store.begin_session` takes), ``head`` and ``mode``, if it was not complete (it ended
    early: quit, end of input, Ctrl-C, or the process was killed); ``None`` otherwise."""
    rows = store.read("SELECT id, begin_at, complete FROM sessions WHERE exercise = ? AND steps IS ? AND head IS ?"
                      f" AND mode = ? AND {SESSION_AS_WRITTEN} ORDER BY id DESC LIMIT 1", (exercise, steps, head, mode))
    if not rows or rows[0][2]:
        return None
    session, begin_at, _ = rows[0]
    done = store.read(f"SELECT DISTINCT step, head FROM {ANSWERS} WHERE session = ? AND outcome != 'wrong'", (session,))
    return Unfinished(session, begin_at, frozenset((step, h) for step, h in done))


def solved(store: Rows) -> dict[str, frozenset[Key]]:
    """Per exercise id, the steps ever answered right (any session, any try)."""
    out: dict[str, set[Key]] = {}
    for exercise, step, head in store.read(f"SELECT DISTINCT exercise, step, head FROM {ANSWERS} WHERE outcome = 'correct'"):
        out.setdefault(exercise, set()).add((step, head))
    return {ex: frozenset(keys) for ex, keys in out.items()}
