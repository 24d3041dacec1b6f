"""What a practice session asks, decided before it starts: which exercise, which steps, where it begins.

A :class:`Plan` is built in one of three ways, then :func:`resume` may move
its beginning:

* :func:`chosen` -- the exercise (and ``--steps``, ``--head``) the learner
  named;
* :func:`weakest` -- no exercise named: the exercise that trains the weakest
  step kind (:func:`tutor.store.recommend`), started *at* that step: the
  steps before it are given, not asked;
* :func:`due` -- ``--due``: the skills the schedule says are due
  (:mod:`tutor.store.scheduling`), on an exercise of their family.

:func:`resume` looks in the store for the latest session of the same
selection -- the same exercise, steps, head and mode -- and, when it ended
before its last step (quit, end of input, Ctrl-C, a killed process), begins
at the first step it did not finish; ``--restart`` skips it.

Fresh numbers (``practice --fresh``) plug in here: a plan whose ``sol`` is
another exercise's, with ``record_as`` the original id -- progress, the
resume key and the schedule all go under that id.

Pure but for the store reads: nothing here prints or prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import TutorError
from ..base.messages import join_and, t

if TYPE_CHECKING:
    from ..exercise.record import Exercise
    from ..steps import Solution
    from ..store import Recommendation, Stats, Store


@dataclass(frozen=True)
class Plan:
    """A session to run: on ``sol``, the steps ``steps`` (ids; ``None``: every step) of head
    ``head`` (0-based; ``None``: every head), beginning at the 0-based index ``begin_at`` of
    those steps (the earlier ones given); ``why`` the sentence saying why this exercise (or
    ``""``), ``start`` the one saying where it begins (or ``""``); ``record_as`` the exercise
    id progress goes under (``None``: ``sol``'s own)."""

    sol: Solution
    steps: tuple[str, ...] | None = None
    head: int | None = None
    begin_at: int = 0
    why: str = ""
    start: str = ""
    record_as: str | None = None

    @property
    def opening(self) -> tuple[str, ...]:
        """The sentences shown before the session: why this exercise, where it begins."""
        return tuple(s for s in (self.why, self.start) if s)

    @property
    def exercise_id(self) -> str:
        """The id progress, resuming and the schedule use."""
        return self.record_as or self.sol.exercise.id

    @property
    def steps_key(self) -> str | None:
        """The steps as the store keeps them: ids in the catalogue's order, comma-separated."""
        if self.steps is None:
            return None
        from ..steps import STEP_IDS

        return ",".join(s for s in STEP_IDS if s in self.steps)

    def keys(self) -> list[tuple[str, int | None]]:
        """The (step, head) of every step the session walks, in order (given ones included)."""
        from . import select

        return [(s.id, s.head) for s in select(self.sol, self.steps, self.head)]


def head_error(head: int, num_heads: int) -> str:
    """The sentence for a head (0-based) an exercise does not have, with heads counted from 1."""
    if num_heads == 1:
        return t("head.missing_single", head=head + 1)
    return t("head.missing", head=head + 1, last=num_heads)


def chosen(ex: Exercise, steps: Sequence[str] | None = None, head: int | None = None) -> Plan:
    """The plan for the exercise the learner named.  Raises :class:`TutorError` (exit 2) when
    ``steps`` names a step the exercise does not have."""
    from ..steps import has_backward, solve

    sol = solve(ex, backward=steps is not None and has_backward(steps))
    if steps is not None:
        have = {s.id for s in sol.steps}
        missing = [s for s in steps if s not in have]
        if missing:
            raise TutorError(t("practice.missing_steps", steps=", ".join(missing), id=ex.id,
                               has=", ".join(s.id for s in sol.steps if s.head in (0, None))))
    return Plan(sol, None if steps is None else tuple(steps), head)


def weakest(store: Store | None, folders: Sequence[Path] = (), head: int | None = None) -> Plan | None:
    """The exercise that trains the weakest step kind, begun at that step (the earlier steps
    given; only head ``head``'s, 0-based, when given); ``None`` when no exercise is found.
    Raises :class:`TutorError` when the exercise has no such head."""
    from ..exercise.catalog import resolve
    from ..steps import solve

    _, rec = recommendation(store, folders)
    if rec is None:
        return None
    ex = resolve(rec.exercise, folders)
    if head is not None and head >= ex.num_heads:
        raise TutorError(head_error(head, ex.num_heads))
    plan = Plan(solve(ex), head=head)
    keys = plan.keys()
    begin = next((i for i, (step, _) in enumerate(keys) if step == rec.step), 0)
    start = t("practice.weakest", number=begin + 1, total=len(keys), step=rec.step) if begin else ""
    return replace(plan, begin_at=begin, why=why_picked(rec), start=start)


def due(store: Store, exercise: Exercise | None, folders: Sequence[Path] = (),
        at: datetime | None = None) -> Plan | str:
    """The plan that reviews what is due at ``at`` (default now): the due step kinds of the
    family due first, on ``exercise`` when given (its family's due steps), else on the
    exercise of that family that has most of them (then the easiest, then by id).  When
    nothing is due: the sentence that says so (and when the next review is).  Raises
    :class:`TutorError` when no exercise found has the steps due."""
    from ..exercise.catalog import exercises
    from ..steps import STEP_IDS
    from ..store import skills

    at = at or datetime.now(UTC)
    scheduled = [s for s in skills(store, at) if not s.step.startswith("drill:")]  # a kata is reviewed by `code`
    if not scheduled:
        return t("practice.due.empty")
    ready = [s for s in scheduled if s.is_due(at) and (exercise is None or s.family == exercise.family)]
    if not ready:
        if exercise is not None:
            return t("practice.due.mismatch", exercise=exercise.id, family=exercise.family)
        nxt = scheduled[0]
        return t("practice.due.none", when=nxt.due.strftime("%Y-%m-%d %H:%M UTC"), step=nxt.step, family=nxt.family)
    family = ready[0].family
    wanted = [s for s in STEP_IDS if any(r.step == s and r.family == family for r in ready)]
    if exercise is None:
        candidates = [ex for ex in exercises(folders) if ex.family == family]
        scored = [(-len(set(wanted) & step_kinds(ex)), ex.difficulty or 3, ex.id, ex) for ex in candidates]
        scored = [c for c in scored if c[0] < 0]
        if not scored:
            raise TutorError(t("practice.due.no_exercise", family=family, steps=join_and(wanted)))
        exercise = min(scored, key=lambda c: c[:3])[3]
    have = step_kinds(exercise)
    steps = tuple(s for s in wanted if s in have)
    if not steps:
        return t("practice.due.mismatch", exercise=exercise.id, family=exercise.family)
    plan = chosen(exercise, steps)
    return replace(plan, why=t("practice.due.picked", exercise=exercise.id, family=family, steps=join_and(list(steps))))


def resume(store: Store, plan: Plan, mode: str, *, restart: bool = False) -> Plan:
    """``plan`` begun at the first step the latest unfinished session of the same selection
    (exercise, steps, head, ``mode``) did not finish, with a sentence saying so -- unless
    ``restart``, or there is no such session, or it would not begin later than ``plan`` does."""
    if restart:
        return plan
    from ..store import unfinished

    left = unfinished(store, plan.exercise_id, steps=plan.steps_key, head=plan.head, mode=mode)
    if left is None:
        return plan
    keys = plan.keys()
    at = left.resume_at(keys)
    if at <= plan.begin_at or at >= len(keys):
        return plan
    from . import select, step_label

    step = select(plan.sol, plan.steps, plan.head)[at]  # named as its prompt will name it (head_1, Q (head 2))
    return replace(plan, begin_at=at, start=t("practice.resumed", number=at + 1, total=len(keys),
                                              step=step_label(step, plan.sol.exercise.num_heads > 1)))


# --- which exercise trains the weakest step ------------------------------------------------------


def step_kinds(ex: Exercise) -> set[str]:
    """The step ids an exercise has, without solving it (the catalogue's rules)."""
    from ..steps import CATALOGUE

    return {k.id for k in CATALOGUE if k.exists(ex) and not k.backward}  # the backward pass only when asked for


def recommendation(store: Store | None, folders: Sequence[Path] = ()) -> tuple[Stats, Recommendation | None]:
    """The learner's stats (empty without a ``store``) and the exercise that trains their weakest step: one on
    which the mistakes they made at that step can show, when the first pick cannot show them and another can.

    The candidates are the bundled exercises and those of the packs ``folders``
    (the command line passes ``--exercises``, then ``ATTN_TUTOR_PATH``); ``None``
    when there is none.
    """
    from ..exercise.catalog import exercises
    from ..store import Stats, recommend

    stats = store.stats() if store is not None else Stats()
    found = list(exercises(folders))
    options = [(ex.id, step_kinds(ex), ex.difficulty) for ex in found]
    rec = recommend(stats, options)
    if rec is None:
        return stats, None
    # the mistakes the learner made that change this step (made at it, or where they were made they change it too:
    # RoPE's other pairing made at K_rot turns Q_rot as well): an exercise on which they cannot show trains nothing
    # of them (a d_k = 2 RoPE exercise for a pairing mistake: both pairings are one pair there)
    from ..mistakes.invisible import changes, shows

    by_id = {ex.id: ex for ex in found}
    made = [m.key for m in stats.mistakes if m.kind == "diagnosis" and any(
        p.step == rec.step or (p.exercise in by_id and changes(by_id[p.exercise], m.key, rec.step)) for p in m.places)]
    if made:
        if not shows(by_id[rec.exercise], made, rec.step):
            able = {id for id, kinds, _ in options if rec.step in kinds and id != rec.exercise
                    and shows(by_id[id], made, rec.step)}
            if able:  # the step stays the weakest; only the exercises that can show the mistakes train it
                rec = recommend(stats, [(id, kinds if id in able else kinds - {rec.step}, diff)
                                        for id, kinds, diff in options]) or rec
    return stats, rec


def heads_by_id(folders: Sequence[Path] = ()) -> dict[str, int]:
    """The number of heads of every exercise found (bundled, packs), by id."""
    from ..exercise.catalog import exercises

    return {ex.id: ex.num_heads for ex in exercises(folders)}


def why_picked(rec: Recommendation) -> str:
    """The sentence that opens a session whose exercise was picked by :func:`recommendation`."""
    why = (t("stats.next.weak", step=rec.step, right=rec.stats.correct, graded=rec.stats.graded)
           if rec.stats.graded else t("stats.next.new", step=rec.step))
    return t("practice.picked", exercise=rec.exercise, why=why)
