"""Spaced repetition: every graded step is a review of a skill, scheduled by FSRS.

A *skill* is a step kind in an exercise family: ``(weights, masked)``,
``(scores, single-head)`` (the families:
:attr:`tutor.exercise.record.Exercise.family`).  Each skill has one FSRS
card (the ``fsrs`` library, py-fsrs 6: the Free Spaced Repetition Scheduler
that modern flash-card apps use), kept in the ``skills`` table: its
stability, difficulty, when it is due, when it was last reviewed.

Every graded step of a session is one review of its skill, rated from how it
went:

* right at the first try without a hint: **Good**;
* right after wrong tries or after a hint: **Hard**;
* wrong, or revealed with ``show``: **Again**;
* skipped: no review.

The review is written with the answer that decides it, in the same
transaction: a wrong answer writes an Again at once (so a session killed
after it still counts it), and a later right answer to the same step in the
same session revises that review to Hard (it is replayed from the card as it
was before the review, kept in ``reviews.before``).  So a step is reviewed
once per session, and nothing is lost to ``kill -9``.

The scheduler runs with the library's default parameters and desired
retention (0.9), without learning steps (a skill is first due a day or more
later, not minutes: each review is a whole matrix worked by hand) and without
fuzz (the same answers give the same schedule).  The *retention* shown for a
skill is the scheduler's retrievability: the predicted probability of getting
it right now (FSRS counts the days elapsed in whole days).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from .attempt import Attempt
from .schema import REVIEW_AS_WRITTEN, SKILL_AS_WRITTEN, Rows

if TYPE_CHECKING:
    import fsrs

#: The ratings (fsrs.Rating's values), named here so that deciding one needs no import.
AGAIN, HARD, GOOD = 1, 2, 3
_CARD_ID = 1  # one card per row of ``skills``: the library's card id is not used


@cache
def scheduler() -> fsrs.Scheduler:
    """The one FSRS scheduler: default parameters and retention, no learning steps, no fuzz."""
    import fsrs

    return fsrs.Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)


def rating(a: Attempt, previous: int | None) -> int | None:
    """The rating of the review ``a`` decides, given the ``previous`` rating of the same step in the
    same session (``None``: not reviewed yet); ``None`` when ``a`` leaves the review as it is.

    >>> from tutor.store.attempt import Attempt
    >>> rating(Attempt("x", "q", 0, "correct"), None), rating(Attempt("x", "q", 0, "correct", 2), AGAIN)
    (3, 2)
    >>> rating(Attempt("x", "q", 0, "correct", 1, 1), None), rating(Attempt("x", "q", 0, "wrong"), None)
    (2, 1)
    >>> rating(Attempt("x", "q", 0, "wrong", 2), AGAIN) is None, rating(Attempt("x", "q", 0, "skipped"), None) is None
    (True, True)
    """
    if a.outcome == "skipped":
        return None
    if previous is None:
        if a.outcome == "correct":
            return GOOD if a.attempt == 1 and a.hints == 0 else HARD
        return AGAIN  # wrong, or shown
    if previous == AGAIN and a.outcome == "correct":
        return HARD  # right after wrong tries: the Again given at the first wrong try is revised
    return None


def _card(row: tuple | None, at: datetime) -> fsrs.Card:
    """The card of a ``skills`` row (state, learning_step, stability, difficulty, due, last_review), or a new one."""
    import fsrs

    if row is None:
        return fsrs.Card(card_id=_CARD_ID, due=at)
    state, step, stability, difficulty, due, last = row
    return fsrs.Card(card_id=_CARD_ID, state=fsrs.State(state), step=step, stability=stability,
                     difficulty=difficulty, due=datetime.fromisoformat(due),
                     last_review=None if last is None else datetime.fromisoformat(last))


def _read_card(row: tuple | None, at: datetime) -> fsrs.Card:
    """:func:`_card`, a new card for a row whose values the scheduler cannot read (a state or time
    another program wrote)."""
    try:
        return _card(row, at)
    except (ValueError, TypeError):
        return _card(None, at)


def _utc(text: str) -> datetime:
    """An ISO 8601 time the store wrote, as an aware UTC datetime (what the scheduler requires)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def review(conn: sqlite3.Connection, session: int, answer: int, a: Attempt, at: str) -> None:
    """Apply the review answer ``a`` (row ``answer`` of ``session``, answered at ``at``) decides,
    inside the caller's transaction: a new review of the skill ``(a.step, a.family)``, a revision
    of this step's review in this session, or nothing (:func:`rating`)."""
    import fsrs

    assert a.family is not None
    moment = _utc(at)
    # rows of another type (another program wrote them) are not read: the skill starts afresh
    previous = conn.execute("SELECT id, rating, before FROM reviews WHERE session = ? AND step = ? AND head IS ?"
                            f" AND {REVIEW_AS_WRITTEN} ORDER BY id DESC LIMIT 1", (session, a.step, a.head)).fetchone()
    chosen = rating(a, None if previous is None else previous[1])
    if chosen is None:
        return
    card = None
    if previous is not None:
        try:
            card = fsrs.Card.from_json(previous[2])
        except (ValueError, TypeError, KeyError):  # not a card as the scheduler writes it
            card = None
    if card is None:
        card = _read_card(conn.execute("SELECT state, learning_step, stability, difficulty, due, last_review FROM skills"
                                       f" WHERE step = ? AND family = ? AND {SKILL_AS_WRITTEN}",
                                       (a.step, a.family)).fetchone(), moment)
    if card.last_review is not None and moment < card.last_review:
        moment = card.last_review  # a clock set back: never review before the last review
    after, _log = scheduler().review_card(card, fsrs.Rating(chosen), review_datetime=moment)
    conn.execute(
        "INSERT INTO skills (step, family, state, learning_step, stability, difficulty, due, last_review, reviews)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (step, family) DO UPDATE SET state = excluded.state,"
        " learning_step = excluded.learning_step, stability = excluded.stability, difficulty = excluded.difficulty,"
        " due = excluded.due, last_review = excluded.last_review, reviews = reviews + ?",
        (a.step, a.family, int(after.state), after.step, after.stability, after.difficulty, after.due.isoformat(),
         moment.isoformat(), 0 if previous is not None else 1))
    if previous is not None:
        conn.execute("UPDATE reviews SET rating = ?, answer = ?, at = ? WHERE id = ?", (chosen, answer, at, previous[0]))
    else:
        conn.execute("INSERT INTO reviews (answer, session, step, head, family, rating, at, before)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (answer, session, a.step, a.head, a.family, chosen, at, card.to_json()))


# --- reading the schedule ----------------------------------------------------------------------


@dataclass(frozen=True)
class Skill:
    """One scheduled skill: ``step`` in exercise ``family``, ``due`` (aware UTC), the
    ``retention`` the scheduler predicts at the time asked (0 to 1), its ``reviews``."""

    step: str
    family: str
    due: datetime
    retention: float
    reviews: int

    def is_due(self, at: datetime) -> bool:
        """Whether the skill is due at ``at``."""
        return self.due <= at


def skills(store: Rows, at: datetime | None = None) -> list[Skill]:
    """Every skill reviewed at least once, with its retention at ``at`` (default: now), soonest due first."""
    at = at or datetime.now(UTC)
    out = []
    for step, family, *card, reviews in store.read(
            "SELECT step, family, state, learning_step, stability, difficulty, due, last_review, reviews FROM skills"
            f" WHERE {SKILL_AS_WRITTEN}"):  # rows of another type are left out (counted in Stats.left_out)
        try:
            c = _card(tuple(card), at)
        except (ValueError, TypeError):  # a state or time the scheduler cannot read: left out too
            continue
        out.append(Skill(step, family, c.due, float(scheduler().get_card_retrievability(c, at)), reviews))
    return sorted(out, key=lambda s: (s.due, s.step, s.family))
