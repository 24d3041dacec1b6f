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


#: The times a card of attn-tutor's can hold: it writes the time of a review and a due date at most the
#: scheduler's maximum interval (100 years) later.  A time outside these (the year 9999, a +14:00 offset
#: that carries it past the calendar) was written by another program, and the scheduler cannot add to it.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2500, 1, 1, tzinfo=UTC)
#: The largest stability (days) a card may hold: far beyond any the scheduler reaches in a lifetime of reviews,
#: and far below what overflows its arithmetic.
MAX_STABILITY = 1e9


def card_of(row: tuple, at: datetime) -> fsrs.Card | None:
    """The card of a ``skills`` row ``(state, learning_step, stability, difficulty, due, last_review)``, or
    ``None`` when a value is outside what the scheduler writes: a state it does not have, a negative
    learning step, a stability not in [``fsrs.scheduler.STABILITY_MIN``, :data:`MAX_STABILITY`], a
    difficulty not in [1, 10], a time that does not parse or lies outside [:data:`EARLIEST`, :data:`LATEST`]
    (after its offset).  Such a skill starts afresh (its caller says so).
    ``at``: the time of the reading (unused but for symmetry with :func:`new_card`)."""
    import math

    import fsrs
    from fsrs.scheduler import STABILITY_MIN

    state, step, stability, difficulty, due, last = row
    try:
        kind = fsrs.State(state)
        due_at = _utc(due)
        last_at = None if last is None else _utc(last)
    except (ValueError, TypeError, OverflowError):
        return None
    times = [due_at] + ([] if last_at is None else [last_at])
    if any(not EARLIEST <= moment <= LATEST for moment in times):
        return None
    if step is not None and (not isinstance(step, int) or step < 0):
        return None
    if stability is not None and not (math.isfinite(stability) and STABILITY_MIN <= stability <= MAX_STABILITY):
        return None
    if difficulty is not None and not (math.isfinite(difficulty) and 1.0 <= difficulty <= 10.0):
        return None
    return fsrs.Card(card_id=_CARD_ID, state=kind, step=step, stability=stability, difficulty=difficulty,
                     due=due_at, last_review=last_at)


def new_card(at: datetime) -> fsrs.Card:
    """A card never reviewed, due at ``at``."""
    import fsrs

    return fsrs.Card(card_id=_CARD_ID, due=at)


def _utc(text: str) -> datetime:
    """An ISO 8601 time the store wrote, as an aware UTC datetime (what the scheduler requires).

    Raises ``ValueError``/``TypeError`` for text that is not a time, ``OverflowError`` for one whose
    offset carries it past the calendar (``9999-12-31T23:00:00-14:00``)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def review(conn: sqlite3.Connection, session: int, answer: int, a: Attempt, at: str) -> bool:
    """Apply the review answer ``a`` (row ``answer`` of ``session``, answered at ``at``) decides,
    inside the caller's transaction: a new review of the skill ``(a.step, a.family)``, a revision
    of this step's review in this session, or nothing (:func:`rating`).

    Returns ``True`` when the skill's row held values the scheduler does not write (:func:`card_of`):
    the skill then starts afresh with this review, and the caller says so once."""
    import fsrs

    assert a.family is not None
    moment = _utc(at)
    # rows of another type (another program wrote them) are not read: the skill starts afresh
    previous = conn.execute("SELECT id, rating, before FROM reviews WHERE session = ? AND step = ? AND head IS ?"
                            f" AND {REVIEW_AS_WRITTEN} ORDER BY id DESC LIMIT 1", (session, a.step, a.head)).fetchone()
    chosen = rating(a, None if previous is None else previous[1])
    if chosen is None:
        return False
    card: fsrs.Card | None = None
    if previous is not None:
        try:
            card = card_of(_row_of(fsrs.Card.from_json(previous[2])), moment)  # read as a row of the table is
        except (ValueError, TypeError, KeyError, AttributeError):  # not a card as the scheduler writes it
            card = None
    afresh = False
    if card is None:
        row = conn.execute("SELECT state, learning_step, stability, difficulty, due, last_review FROM skills"
                           f" WHERE step = ? AND family = ? AND {SKILL_AS_WRITTEN}", (a.step, a.family)).fetchone()
        card = None if row is None else card_of(row, moment)
        afresh = row is not None and card is None  # a row the scheduler cannot use: the skill starts again
        if card is None:
            card = new_card(moment)
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
    return afresh


def _row_of(card: fsrs.Card) -> tuple:
    """A card as its ``skills`` row's values (what :func:`card_of` reads)."""
    return (int(card.state), card.step, card.stability, card.difficulty, card.due.isoformat(),
            None if card.last_review is None else card.last_review.isoformat())


# --- reading the schedule ----------------------------------------------------------------------


@dataclass(frozen=True)
class Skill:
    """One scheduled skill: ``step`` in exercise ``family``, ``due`` (aware UTC), the
    ``retention`` the scheduler predicts at the time asked (0 to 1), its ``reviews``, and ``recalled``: of
    those, the reviews rated above Again (a right answer).  FSRS predicts a retrievability of 1 just after any
    review, an Again too, so a skill never recalled (``recalled == 0``) shows 100% that the learner never earned."""

    step: str
    family: str
    due: datetime
    retention: float
    reviews: int
    recalled: int = 0

    def is_due(self, at: datetime) -> bool:
        """Whether the skill is due at ``at``."""
        return self.due <= at


def skills(store: Rows, at: datetime | None = None) -> list[Skill]:
    """Every skill reviewed at least once, with its retention at ``at`` (default: now), soonest due first."""
    at = at or datetime.now(UTC)
    out = []
    for step, family, *card, reviews, recalled in store.read(
            "SELECT step, family, state, learning_step, stability, difficulty, due, last_review, reviews,"
            " (SELECT COUNT(*) FROM reviews r WHERE r.step = skills.step AND r.family = skills.family"
            f" AND typeof(r.rating) = 'integer' AND r.rating > {AGAIN}) FROM skills"
            f" WHERE {SKILL_AS_WRITTEN}"):  # rows of another type are left out (counted in Stats.left_out)
        c = card_of(tuple(card), at)
        if c is None:  # values the scheduler does not write: left out too (unreadable_skills counts them)
            continue
        out.append(Skill(step, family, c.due, float(scheduler().get_card_retrievability(c, at)), reviews, recalled))
    return sorted(out, key=lambda s: (s.due, s.step, s.family))


def unreadable_skills(store: Rows) -> int:
    """How many rows of ``skills`` are of the right types but hold values the scheduler does not write
    (:func:`card_of`): left out of the schedule, each starting afresh at its next review."""
    now = datetime.now(UTC)
    return sum(card_of(tuple(row), now) is None for row in store.read(
        "SELECT state, learning_step, stability, difficulty, due, last_review FROM skills"
        f" WHERE {SKILL_AS_WRITTEN}"))
