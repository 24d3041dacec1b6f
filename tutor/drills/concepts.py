"""``drill concepts``: questions from the concept bank, each followed by its chain of follow-ups.

In ``free`` mode the learner answers in their own words, then says for each
key point whether the answer made it, then reads the model answer and the
common wrong answers.  In ``choice`` mode the options are the bank's choice
answer (a short claim of the wrong answers' length; its short answer where it
has none) and its common wrong answers, shuffled; a wrong pick says why it is
wrong.  The bank itself (its schema, its files, its checks) is :mod:`.bank`.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from ..base.messages import language, t
from .bank import Bank, Concept
from .record import Question, lettered

Mode = Literal["free", "choice"]
CHAIN = 3  # questions in one chain at most: the question and up to two follow-ups


def to_question(c: Concept, mode: Mode, rng: random.Random, follow_up: str | None = None) -> Question:
    """One bank question as a drill :class:`Question` (free text, or lettered options)."""
    q = c.q.in_language(language())
    common: dict[str, Any] = dict(
        drill="concepts", topic=c.topic, id=q.id, prompt=q.question, model_answer=q.model_answer,
        key_points=tuple(q.key_points), wrong_answers=tuple((w.answer, w.why) for w in q.wrong_answers),
        hint=t("drill.concepts.hint", point=q.key_points[0]), follow_up=follow_up,
        explain=(t("drill.concepts.model"), q.model_answer),
        json={"follow_ups": list(q.follow_ups), "claims": list(q.claims), "sources": list(q.sources),
              "source": c.source},
    )
    if mode == "free":
        return Question(kind="free", answer=None, answer_text=q.short_answer, **common)
    right = q.choice_answer or q.short_answer  # a short claim like the wrong answers: length gives nothing away
    options = [("right", right, True, "")] + [(f"wrong-{i + 1}", w.answer, False, w.why)
                                                       for i, w in enumerate(q.wrong_answers[:3])]
    rng.shuffle(options)
    choices = lettered(options)
    chosen = next(ch for ch in choices if ch.right)
    return Question(kind="choice", answer=chosen.key, answer_text=t("drill.choice.answer", key=chosen.key, text=chosen.text), choices=choices, **common)


def chain(bank: Bank, root: Concept, seen: set[str]) -> list[tuple[Concept, str | None]]:
    """``root`` and its follow-ups, depth first, at most :data:`CHAIN` questions, none asked before
    (``seen`` is updated); each with the id of the question it follows up."""
    out: list[tuple[Concept, str | None]] = []

    def walk(c: Concept, parent: str | None) -> None:
        if len(out) >= CHAIN or c.id in seen:
            return
        seen.add(c.id)
        out.append((c, parent))
        for f in c.q.follow_ups:
            walk(bank.get(f), c.id)

    walk(root, None)
    return out


def questions(bank: Bank, *, seed: int, count: int, topic: str | None = None, mode: Mode = "free") -> list[Question]:
    """``count`` questions drawn with ``seed``: a question of ``topic`` (any topic without one), then its
    follow-ups, then another chain, until ``count``.  Raises ``KeyError`` for a topic the bank lacks."""
    if topic is not None and topic not in bank.topics:
        raise KeyError(topic)
    rng = random.Random(seed)
    roots = [c for c in bank.concepts if topic is None or c.topic == topic]
    rng.shuffle(roots)
    seen: set[str] = set()
    out: list[Question] = []
    for root in roots:
        for c, parent in chain(bank, root, seen):
            out.append(to_question(c, mode, rng, parent))
        if len(out) >= count:
            break
    return out[:count]


def listing(bank: Bank) -> dict[str, Any]:
    """``drill concepts --list``: ``{"topics": [...], "questions": [{"id", "topic", "question",
    "follow_ups", "claims", "source", "file"}]}``."""
    return {"topics": bank.topics,
            "questions": [{"id": c.id, "topic": c.topic, "question": c.q.in_language(language()).question, "follow_ups": list(c.q.follow_ups),
                           "claims": list(c.q.claims), "source": c.source, "file": c.file} for c in bank.concepts]}
