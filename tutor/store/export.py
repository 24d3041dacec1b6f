"""A learner's progress as a file to hand in, and a class's files read together (issue 24).

:func:`export_document` is what ``stats --export FILE`` writes: the learner's
own record and nothing more -- counts per step and per (exercise, step), the
mistakes made, the review schedule of every skill -- with no path, no user or
machine name, no answer text.  :func:`class_progress` reads a folder's worth
of such documents (``report DIR``), each checked field by field (a hand-edited
or hostile file is refused in one line naming the file and the field), and
adds them up: per step how many learners practised it and how often they were
right; per skill (a step in an exercise family) the review state of the class
(learners scheduled, due at the time asked, the lowest and the mean retention
the scheduler predicted when each file was exported).

Pure: the caller reads the store and the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..base.errors import TutorError
from ..base.messages import Msg
from .queries import Stats

#: What a progress file says it is, and the version of its layout.
FORMAT, VERSION = "attn-tutor-progress", 1
#: The most entries any list of a progress file may hold (a learner has a few hundred at most).
MAX_ITEMS = 10_000


def export_document(stats: Stats, at: datetime | None = None) -> dict[str, Any]:
    """The learner's record (``stats`` read with every mistake) as ``stats --export`` writes it:
    ``{"format", "version", "exported", "sessions", "answers", "steps", "practised", "skills", "mistakes"}``.

    ``steps``: ``{"step", "correct", "wrong", "shown", "skipped", "first_try"}`` per step kind;
    ``practised``: ``{"exercise", "step", "graded"}``; ``skills``: ``{"step", "family", "due",
    "retention", "reviews", "recalled"}`` (``due`` ISO 8601 UTC, ``retention`` 0 to 1 at ``at``, 4 places;
    ``recalled`` the reviews rated above Again: with none, the retention FSRS predicts is not the learner's);
    ``mistakes``: ``{"key", "kind", "count"}``.  Drill answers are left out, as ``stats`` leaves them out
    of practice.
    """
    at = at or datetime.now(UTC)
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported": at.replace(microsecond=0).isoformat(),
        "sessions": stats.sessions,
        "answers": stats.answers,
        "steps": [{"step": s.step, "correct": s.correct, "wrong": s.wrong, "shown": s.shown, "skipped": s.skipped,
                   "first_try": s.first_try} for s in stats.steps],
        "practised": [{"exercise": ex, "step": step, "graded": n} for (ex, step), n in sorted(stats.practised.items())],
        "skills": [{"step": k.step, "family": k.family, "due": k.due.isoformat(), "retention": round(k.retention, 4),
                    "reviews": k.reviews, "recalled": k.recalled} for k in stats.skills if not k.step.startswith("drill:")],
        "mistakes": [{"key": m.key, "kind": m.kind, "count": m.count} for m in stats.mistakes],
    }


# --- a class's files ------------------------------------------------------------------------------


def _bad(name: str, field: str, expected: str) -> TutorError:
    return TutorError(Msg("progress.bad_field", file=name, field=field, expected=Msg(f"progress.expected.{expected}")))


#: The largest count a progress file may hold (a learner answers a few thousand times at most).
MAX_COUNT = 10**12


def _count(value: Any, name: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise _bad(name, field, "count")
    return value


def _text(value: Any, name: str, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise _bad(name, field, "text")
    return value


def _items(doc: dict[str, Any], key: str, name: str) -> list[dict[str, Any]]:
    value = doc.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_ITEMS or not all(isinstance(v, dict) for v in value):
        raise _bad(name, key, "list")
    return value


def checked(doc: Any, name: str) -> dict[str, Any]:
    """``doc`` (a parsed JSON document from file ``name``) when it is a progress file of this version, every
    field of the type :func:`export_document` writes; raises :class:`TutorError` naming the first field that is not."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise TutorError(Msg("progress.not_progress", file=name))
    if doc.get("version") != VERSION:
        raise _bad(name, "version", "version")
    for i, s in enumerate(_items(doc, "steps", name)):
        _text(s.get("step"), name, f"steps[{i}].step")
        for k in ("correct", "wrong", "shown", "skipped", "first_try"):
            _count(s.get(k, 0), name, f"steps[{i}].{k}")
        if s.get("first_try", 0) > s.get("correct", 0):  # right at the first try is a part of right
            raise _bad(name, f"steps[{i}].first_try", "first_try")
    for i, p in enumerate(_items(doc, "practised", name)):
        _text(p.get("exercise"), name, f"practised[{i}].exercise")
        _text(p.get("step"), name, f"practised[{i}].step")
        _count(p.get("graded", 0), name, f"practised[{i}].graded")
    for i, sk in enumerate(_items(doc, "skills", name)):
        _text(sk.get("step"), name, f"skills[{i}].step")
        _text(sk.get("family"), name, f"skills[{i}].family")
        _count(sk.get("reviews", 0), name, f"skills[{i}].reviews")
        if "recalled" in sk:  # written since the trial of issue 24; an older file's retention is taken as it is
            if _count(sk["recalled"], name, f"skills[{i}].recalled") > sk.get("reviews", 0):
                raise _bad(name, f"skills[{i}].recalled", "recalled")
        r = sk.get("retention")
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1:
            raise _bad(name, f"skills[{i}].retention", "retention")
        _due(sk.get("due"), name, f"skills[{i}].due")
    for i, m in enumerate(_items(doc, "mistakes", name)):
        _text(m.get("key"), name, f"mistakes[{i}].key")
        _count(m.get("count", 0), name, f"mistakes[{i}].count")
    return doc


def _due(value: Any, name: str, field: str) -> datetime:
    if not isinstance(value, str) or len(value) > 40:
        raise _bad(name, field, "time")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _bad(name, field, "time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def class_progress(docs: Sequence[tuple[str, dict[str, Any]]], at: datetime | None = None,
                   like: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The class's progress from ``docs`` (``(learner, checked document)``; :func:`checked`) at ``at`` (default now):

    ``{"learners", "steps": [{"step", "learners", "correct", "graded", "accuracy"}], "practised": [{"exercise", "step", "learners",
    "graded"}], "skills": [{"step",
    "family", "learners", "due", "reviews", "never_recalled", "retention_min", "retention_mean"}], "mistakes": [{"key",
    "learners", "count"}]}``: ``accuracy`` right of graded as a fraction from 0 to 1 (``null`` before any),
    ``due`` how many learners' review of the skill is due at ``at``, ``never_recalled`` how many learners
    reviewed it only with wrong answers (``recalled`` 0), the retentions (fractions, 4 places) as each file was
    exported, of the learners who have recalled it only (``null`` when none has: FSRS predicts a retrievability of 1
    just after an Again, which no learner earned); practised per exercise in the contract's order of steps,
    mistakes by how many learners made them.  Steps in the order first met, skills by step then family.

    ``like`` maps a roster's variant id to the exercise it was drawn like (the roster index of ``handouts``:
    :func:`tutor.audit.batch.read_index`): the practice on the variants of one exercise adds up under that
    exercise's id, as :func:`tutor.audit.classview.class_report` adds the submissions up (one exercise handed
    out to a class, not one exercise per student)."""
    at = at or datetime.now(UTC)
    like = like or {}
    steps: dict[str, list[int]] = {}
    skills: dict[tuple[str, str], tuple[int, int, int, list[float]]] = {}
    never: dict[tuple[str, str], int] = {}
    mistakes: dict[str, list[int]] = {}
    practised: dict[tuple[str, str], list[int]] = {}
    for name, doc in docs:
        learner: set[tuple[str, str]] = set()  # a learner who practised two variants of one exercise is one learner of it
        for p in doc.get("practised", []):
            place = (like.get(p["exercise"], p["exercise"]), p["step"])
            c = practised.setdefault(place, [0, 0])
            c[0] += place not in learner
            learner.add(place)
            c[1] += p.get("graded", 0)
        for s in doc.get("steps", []):
            c = steps.setdefault(s["step"], [0, 0, 0])
            c[0] += 1
            c[1] += s.get("correct", 0)
            c[2] += s.get("correct", 0) + s.get("wrong", 0) + s.get("shown", 0)
        for k in doc.get("skills", []):
            n, due, reviews, kept = skills.get((k["step"], k["family"]), (0, 0, 0, []))
            recalled = k.get("recalled", 1) > 0  # an older file without the count: its retention as written
            never[k["step"], k["family"]] = never.get((k["step"], k["family"]), 0) + (not recalled)
            skills[k["step"], k["family"]] = (n + 1, due + (_due(k["due"], name, "skills.due") <= at),
                                              reviews + k.get("reviews", 0),
                                              [*kept, float(k["retention"])] if recalled else kept)
        seen = set()
        for m in doc.get("mistakes", []):
            c = mistakes.setdefault(m["key"], [0, 0])
            if m["key"] not in seen:
                c[0] += 1
                seen.add(m["key"])
            c[1] += m.get("count", 0)
    return {
        "learners": len(docs),
        "steps": [{"step": s, "learners": n, "correct": right, "graded": graded,
                   "accuracy": round(right / graded, 4) if graded else None} for s, (n, right, graded) in steps.items()],
        "practised": [{"exercise": ex, "step": s, "learners": n, "graded": graded}
                      for (ex, s), (n, graded) in sorted(practised.items(), key=lambda kv: _step_order(*kv[0]))],
        "skills": [{"step": s, "family": f, "learners": n, "due": due, "reviews": reviews, "never_recalled": never[s, f],
                    "retention_min": round(min(r), 4) if r else None,
                    "retention_mean": round(sum(r) / len(r), 4) if r else None}
                   for (s, f), (n, due, reviews, r) in sorted(skills.items())],
        "mistakes": [{"key": k, "learners": n, "count": count}
                     for k, (n, count) in sorted(mistakes.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))],
    }


def _step_order(exercise: str, step: str) -> tuple[str, int, str]:
    """An (exercise, step) pair's place: by exercise, then in the contract's order of step ids (``q`` before
    ``scores``), a step id the catalogue does not know last, by name."""
    from ..steps import STEP_IDS

    return exercise, STEP_IDS.index(step) if step in STEP_IDS else len(STEP_IDS), step
