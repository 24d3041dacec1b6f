"""Drill results in the progress store, and the drills section of ``stats``.

Drill answers use the store's ``answers`` table as practice answers do, one
:class:`tutor.store.attempt.Attempt` per question, under names of their own so that
the schema is unchanged (no migration):

* ``exercise`` is ``drill:<drill>`` (``drill:shapes``, ``drill:concepts``);
* ``step`` is ``drill:<drill>:<topic>`` (``drill:shapes:scores``,
  ``drill:counts:kv_cache``, ``drill:masks:sdpa_bool``, ``drill:concepts:scaling``);
* ``head`` is NULL and ``attempt`` 1 (one answer per question); ``hints`` the
  hints taken; its mistake (a row of ``mistakes``) the key of the mistake
  recognised (``drill.shape.order``, ``drill.counts.kv.no_two``); ``answer``
  the text typed; ``family`` NULL, so drill answers are not reviews in the
  practice schedule;
* a run is a row of ``sessions`` with ``exercise`` ``drill:<drill>`` (or
  ``drill:interview``) and ``mode`` the drill's mode.

Practice statistics leave these rows out (:data:`DRILL_PREFIX`); this module
summarises them: pure functions of the attempts, or of their counts per step
name as the store aggregates them in SQL (``stats`` on a store of any size).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..store.attempt import Attempt, OutcomeCounts
from .record import DRILL_PREFIX, Question

DRILLS = ("shapes", "counts", "masks", "concepts", "code")  # code: the katas' checks (``drill:code:<kata>``)


@dataclass(frozen=True)
class TopicStats(OutcomeCounts):
    """Counts for one drill topic (``shapes``/``scores``, ``concepts``/``scaling``)."""

    drill: str
    topic: str
    correct: int = 0
    wrong: int = 0
    shown: int = 0
    skipped: int = 0


def split_step(step: str) -> tuple[str, str] | None:
    """``drill:shapes:scores`` -> ``("shapes", "scores")``; ``None`` for a practice step."""
    if not step.startswith(DRILL_PREFIX):
        return None
    drill, _, topic = step[len(DRILL_PREFIX):].partition(":")
    return (drill, topic) if drill and topic else None


def topic_stats(attempts: Iterable[Attempt]) -> list[TopicStats]:
    """One :class:`TopicStats` per drill topic answered, drills in :data:`DRILLS` order, topics by name."""
    counts: dict[str, dict[str, int]] = {}
    for a in attempts:
        c = counts.setdefault(a.step, {"correct": 0, "wrong": 0, "shown": 0, "skipped": 0})
        c[a.outcome] += 1
    return counted([(step, c["correct"], c["wrong"], c["shown"], c["skipped"]) for step, c in counts.items()])


def counted(rows: Iterable[tuple[str, int, int, int, int]]) -> list[TopicStats]:
    """:func:`topic_stats` from answers already counted per step name, ``(step, correct, wrong, shown,
    skipped)`` (:attr:`tutor.store.queries.Stats.drill_outcomes`, counted in SQL): practice steps are left out."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for step, correct, wrong, shown, skipped in rows:
        key = split_step(step)
        if key is None:
            continue
        c = counts.setdefault(key, {"correct": 0, "wrong": 0, "shown": 0, "skipped": 0})
        for name, n in (("correct", correct), ("wrong", wrong), ("shown", shown), ("skipped", skipped)):
            c[name] += n
    order = {d: i for i, d in enumerate(DRILLS)}
    return [TopicStats(d, tp, **c) for (d, tp), c in sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0]))]


def command_for(drill: str, topic: str, banks: Iterable[str] = ()) -> str:
    """The command that drills ``topic``: ``attn-tutor drill concepts --topic scaling``, ``attn-tutor drill masks``;
    with ``--bank`` for each folder of ``banks`` (the instructor's banks the topic's questions came from: without
    them the topic may not exist, issue 20, E)."""
    import shlex

    if drill == "concepts":
        return f"attn-tutor drill concepts --topic {topic}" + "".join(f" --bank {shlex.quote(b)}" for b in banks)
    if drill == "code":  # a kata: checked again in the file `code start` writes by default
        return f"attn-tutor code check {topic.replace('-', '_')}.py --watch"
    if drill == "counts" and topic.replace("_", "").isalpha():  # issue 23: a count's topic is its --kind
        return f"attn-tutor drill counts --kind {topic}"
    return f"attn-tutor drill {drill}"


def banks_of(questions: Iterable[Question]) -> tuple[str, ...]:
    """The bank folders (as given to ``--bank``) that ``questions`` came from, in the order met; the bundled
    bank is none of them."""
    found = (q.json.get("source") for q in questions if q.drill == "concepts")
    return tuple(dict.fromkeys(str(s) for s in found if s and s != "bundled"))


def weakest(stats: Iterable[TopicStats], n: int = 3) -> list[TopicStats]:
    """Up to ``n`` topics with a miss, weakest first (lowest smoothed score, then most misses)."""
    missed = [s for s in stats if s.graded > s.correct]
    return sorted(missed, key=lambda s: (s.score, -(s.graded - s.correct), s.drill, s.topic))[:n]


def drills_document(stats: list[TopicStats]) -> dict[str, Any]:
    """The drills section of ``stats --format json`` from the topics' counts (:func:`counted`, :func:`topic_stats`):
    ``{"answers", "topics": [{"drill", "topic", "correct", "wrong", "shown", "skipped", "graded", "accuracy"}],
    "review": [{"drill", "topic", "accuracy", "command"}]}``; accuracies rounded to 4 places.  The katas' checks
    (``drill:code:<kata>``) are apart: ``"katas": [{"kata", "checks", "passed"}]`` (present when a kata was
    checked), and a kata is to review only while no check of it has passed."""

    def accuracy(s: TopicStats) -> float | None:
        return None if s.accuracy is None else round(s.accuracy, 4)

    katas = [s for s in stats if s.drill == "code"]  # a kata's checks: passed once is done, not an accuracy
    stats = [s for s in stats if s.drill != "code"]
    doc = _drills(stats, accuracy)
    if katas:
        doc["katas"] = [{"kata": s.topic, "checks": s.graded, "passed": s.correct} for s in katas]
        doc["review"] += [{"drill": "code", "topic": s.topic, "accuracy": None, "command": command_for("code", s.topic)}
                          for s in katas if not s.correct]
    return doc


def _drills(stats: list[TopicStats], accuracy: Any) -> dict[str, Any]:
    return {
        "answers": sum(s.graded + s.skipped for s in stats),
        "topics": [{"drill": s.drill, "topic": s.topic, "correct": s.correct, "wrong": s.wrong, "shown": s.shown,
                    "skipped": s.skipped, "graded": s.graded, "accuracy": accuracy(s)} for s in stats],
        "review": [{"drill": s.drill, "topic": s.topic, "accuracy": accuracy(s), "command": command_for(s.drill, s.topic)}
                   for s in weakest(stats)],
    }
