"""The learner's progress as plain data: what ``stats --format json`` prints and the terminal view renders.

:func:`stats_document` turns the store's :class:`~tutor.store.Stats` and the
recommendation of :func:`tutor.practice.plan.recommendation` into one
document (the drills' section is :func:`tutor.drills.results.drills_document`'s).
Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.messages import t
from ..mistakes import GROUP_SEP

if TYPE_CHECKING:
    from ..store import Recommendation, Stats


def mistake_name(key: str) -> str:
    """What a mistake's key is called where it is counted (``mistake.<key>``; every key a session can
    store has one, a test holds it); a key only another version wrote is said to be unnamed, with the key.  A
    group's key (:func:`tutor.mistakes.diagnose.group_key`: mistakes one answer could not tell apart) is one
    error, its possible causes named."""
    from ..base.messages import EN

    if GROUP_SEP in key:  # mistakes one answer could not tell apart: one error, its possible causes named
        return t("mistake.group", mistakes=t("mistake.group.sep").join(mistake_name(k) for k in key.split(GROUP_SEP)))
    return t(f"mistake.{key}") if f"mistake.{key}" in EN else t("mistake.unnamed", key=key)


def stats_document(data: Stats, rec: Recommendation | None, path: str,
                   heads: dict[str, int] | None = None) -> dict[str, Any]:
    """The stats as plain data: what ``stats --format json`` prints and the terminal view renders.

    ``{"store", "sessions", "answers", "steps", "mistakes", "mistake_kinds", "due_now", "next", "left_out"}``:

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
      ``mistake_kinds`` how many different mistakes were made (``mistakes`` lists the most frequent);
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
        "mistake_kinds": data.mistake_kinds,
        "due_now": [{"step": k.step, "family": k.family, "due": k.due.isoformat()} for k in data.skills
                    if k.is_due(now)],
        "next": nxt,
        "left_out": data.left_out,
    }
