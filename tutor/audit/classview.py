"""The class view of graded submissions (issue 24, ``attn-tutor report``): what the class got right and wrong.

From the rows of :mod:`tutor.audit.batch` (a folder graded now, or the CSV
``check --format csv`` wrote, read back by :func:`rows_from_csv`),
:func:`class_report` computes

* per step (an exercise's step as the files place it, ``heads[1].weights``)
  how many submissions gave it and how many of those got it right;
* the mistakes named, ranked by how many submissions made them (each counted
  once per submission), with the first submission that made it as an example;
  mistakes one answer could not tell apart are one error, one row (their keys
  joined: :func:`tutor.mistakes.diagnose.group_key`);
* what to assign next (:func:`assignment`): for the most common mistake, the
  bundled exercise on which that mistake shows at the step where it was made
  (:func:`tutor.mistakes.invisible.suggestion`, the one mapping from a mistake to
  an exercise, which ``explain`` and ``validate`` use too); for a slip of the
  online softmax, that exercise's ``--tiled`` drill; for any other finding
  (a single slipped entry, a NaN), the step itself, practised on the exercise.

Read back from the CSV, a submission's mistakes are all placed at its first wrong step (the CSV names
the step of none of them); a folder graded now places each at the step where it was named.

Pure: no printing and no files; the report is data for :mod:`tutor.render.report`.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..base.errors import TutorError
from ..base.messages import Msg
from ..base.textsafe import shown, spreadsheet_text
from .batch import CORRECT, TILED, UNUSABLE, WRONG, Row, place_of

#: The columns a CSV must have to be read back (those ``check --format csv`` writes; ``steps`` last).
NEEDED = ("student", "exercise", "verdict", "first_wrong_step", "mistakes", "steps")
#: What separates the keys in the ``mistakes`` cell and the items of the ``steps`` cell.
SEP = ";"
#: The most rows a CSV is read for (a class; ten thousand is more than any course has).
MAX_ROWS = 10_000


@dataclass(frozen=True)
class StepShare:
    """Step ``place`` of ``exercise``: given by ``given`` submissions, right in ``right`` of them."""

    exercise: str
    place: str
    given: int
    right: int


@dataclass(frozen=True)
class MistakeRank:
    """Mistake ``key``, made by ``count`` submissions; ``example`` the first one's student, on ``exercise`` at step ``step``."""

    key: str
    count: int
    example: str
    exercise: str
    step: str


@dataclass(frozen=True)
class Assignment:
    """What to assign for a mistake: practise ``exercise`` (all of it; only ``step`` when given; its
    online softmax when ``tiled``; its backward pass when ``backward``).  ``shows`` True when the mistake shows on
    that exercise at that step (a suggestion of :func:`tutor.mistakes.invisible.suggestion`); ``backward`` True
    when that step is a gradient (:func:`tutor.mistakes.invisible.in_backward`): forward-only practice never
    reaches it."""

    key: str
    exercise: str
    step: str | None = None
    tiled: bool = False
    shows: bool = False
    backward: bool = False
    #: for one error whose causes its exercise could not tell apart (a group's key): the causes that give
    #: different numbers on ``exercise`` (:func:`tutor.mistakes.invisible.apart`)
    apart: tuple[str, ...] = ()
    #: for such an error: no bundled exercise gives its causes (those :func:`tutor.mistakes.invisible.apart`
    #: compares) different numbers at ``step``
    alike_everywhere: bool = False

    @property
    def command(self) -> str:
        """The command that starts it: ``attn-tutor practice ID`` (``--steps S``, ``--tiled``, ``--backward``;
        a gradient step named in ``--steps`` needs no ``--backward``, which practice refuses beside ``--steps``)."""
        if self.tiled:
            return f"attn-tutor practice {self.exercise} --tiled"
        if self.step is not None:
            return f"attn-tutor practice {self.exercise} --steps {self.step}"
        if self.backward:
            return f"attn-tutor practice {self.exercise} --backward"
        return f"attn-tutor practice {self.exercise}"


@dataclass(frozen=True)
class ClassReport:
    """The class view: ``counts`` by verdict (:func:`tutor.audit.batch.summary`), ``steps``, ``mistakes`` (most
    made first), ``assign`` (for the most common mistake, ``None`` when none was named); ``copies`` each
    submission of another student's roster variant (``(student, variant, whose)``); ``duplicates`` each student
    who handed in more than one file, with the files."""

    counts: dict[str, int]
    steps: tuple[StepShare, ...]
    mistakes: tuple[MistakeRank, ...]
    assign: Assignment | None
    copies: tuple[tuple[str, str, str], ...] = ()
    duplicates: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def most_common(self) -> tuple[MistakeRank, ...]:
        """The mistakes made by as many submissions as the most common one (more than one on a tie)."""
        return tuple(m for m in self.mistakes if m.count == self.mistakes[0].count) if self.mistakes else ()


def class_report(rows: Sequence[Row], *, with_assignment: bool = True, like: Mapping[str, str] | None = None) -> ClassReport:
    """The class view of ``rows`` (see the module's docstring).  Unusable submissions count in ``counts`` only.

    ``like`` maps a roster's variant id to the exercise it was drawn like (a roster index says it:
    :func:`tutor.audit.batch.read_index`): the variants of one exercise add up per step under that exercise's id,
    as one exercise handed out to a class.  A variant the index does not list is its own exercise (its id's
    prefix is not proof of where it came from)."""
    from .batch import duplicates, summary

    like = like or {}

    shares: dict[tuple[str, str], list[int]] = {}
    made: dict[str, tuple[Row, str, int, str]] = {}  # key -> the first submission that made it, its step, how many did, its exercise
    for r in rows:
        if r.verdict == UNUSABLE or r.exercise is None:
            continue
        exercise = like.get(r.exercise, r.exercise)
        for place, ok in r.steps:
            s = shares.setdefault((exercise, place), [0, 0])
            s[0] += 1
            s[1] += ok
        for key, step in zip(r.mistakes, r.mistake_steps, strict=True):
            first, at, n, on = made.get(key, (r, step, 0, exercise))
            made[key] = (first, at, n + 1, on)
    steps = tuple(sorted((StepShare(ex, place, g, ok) for (ex, place), (g, ok) in shares.items()), key=_order))
    ranked = sorted(made.items(), key=lambda kv: -kv[1][2])  # stable: among equals, the one made first
    mistakes = tuple(MistakeRank(key, n, first.student, on, step) for key, (first, step, n, on) in ranked)
    assign = assignment(mistakes[0].key, mistakes[0].step, mistakes[0].exercise) if mistakes and with_assignment else None
    copies = tuple((r.student, r.exercise or "", r.variant_of[0]) for r in rows if r.variant_of is not None)
    return ClassReport(summary(rows), steps, mistakes, assign, copies, tuple(duplicates(rows)))


def _order(s: StepShare) -> tuple[str, int, int, str]:
    """A step's place in the report: by exercise, then in the contract's order of step ids, then by head."""
    from ..steps import STEP_IDS

    head, _, step = s.place.rpartition(".")  # heads[1].weights -> ("heads[1]", "weights")
    number = head.removeprefix("heads[").removesuffix("]")
    return (s.exercise, STEP_IDS.index(step) if step in STEP_IDS else len(STEP_IDS),
            int(number) if number.isdigit() else -1, s.place)


def assignment(key: str, step: str, exercise: str) -> Assignment:
    """What to assign to a class that made mistake ``key`` at step ``step`` (an id; ``tiled``) of ``exercise``.

    A misconception of the catalogue: the first bundled exercise (in learning order) other than
    ``exercise`` on which it shows at ``step`` (:func:`tutor.mistakes.invisible.suggestion`); one error with
    causes its exercise cannot tell apart (a group's key, :func:`tutor.mistakes.diagnose.group_key`): the first
    on which they give different numbers (:func:`tutor.mistakes.invisible.apart`), never one where they tie again; a slip of the
    online softmax: ``exercise``'s ``--tiled`` drill; anything else, or no such exercise: ``step``
    practised on ``exercise`` when it is bundled, else on the first bundled exercise that has the step.
    """
    from ..exercise.catalog import bundled
    from ..mistakes import GROUP_SEP
    from ..mistakes.diagnose import MISCONCEPTIONS, members
    from ..mistakes.invisible import apart, comparable, in_backward, suggestion

    ids = {ex.id for ex in bundled()}
    if step == TILED or key.startswith("tiled_"):
        return Assignment(key, exercise if exercise in ids else "single-head-3x4", tiled=True)
    if key in {m.key for m in MISCONCEPTIONS}:
        found = suggestion(key, step, exercise)
        if found is not None:
            return Assignment(key, found, shows=True, backward=in_backward(step))
    if GROUP_SEP in key:  # one error with causes its exercise cannot tell apart: where they give different numbers
        told = apart(members(key), step, exercise)
        if told is not None:
            return Assignment(key, told[0], shows=True, backward=in_backward(step), apart=told[1])
        if len(comparable(members(key))) >= 2:  # looked for, and no bundled exercise tells them apart
            return Assignment(key, _with_step(step, exercise), step=step, alike_everywhere=True)
    return Assignment(key, _with_step(step, exercise), step=step)


def _with_step(step: str, exercise: str) -> str:
    """``exercise`` when it is bundled and has step ``step``, else the first bundled exercise (in learning order)
    that has it, else ``exercise``."""
    from ..exercise.catalog import bundled
    from ..mistakes.invisible import learning_order
    from ..steps import KINDS

    kind = KINDS.get(step)
    if kind is None:
        return exercise
    found = [ex for ex in bundled() if ex.id == exercise and kind.exists(ex)] or \
        [ex for ex in learning_order() if kind.exists(ex)]
    return found[0].id if found else exercise


def rows_from_csv(text: str, name: str, bad: list[str] | None = None) -> list[Row]:
    """The rows of a CSV that ``check --format csv`` wrote (a byte order mark is allowed), as :func:`class_report`
    reads them: each cell as it was before the CSV guarded it (:func:`tutor.base.textsafe.spreadsheet_text`), a
    row of empty cells (a spreadsheet's leftover) skipped; raises :class:`TutorError` naming ``name`` and the
    line for a CSV that is not one.  A row that cannot be read (a verdict or a steps item edited by hand) is
    left out and its line said in ``bad`` when it is given (one bad row of thirty does not lose the class);
    without ``bad`` it raises as the rest does."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    first = lines[0] if lines else ""
    delimiter = ";" if first.count(";") > first.count(",") else ","  # a header row holds no ; of ours: Excel's list separator
    try:
        reader = csv.DictReader(lines, strict=True, delimiter=delimiter)
        header = [h.strip() for h in reader.fieldnames or []]
        reader.fieldnames = header
        missing = [c for c in NEEDED if c not in header]
        if len(missing) == len(NEEDED):  # none of ours: not a gradebook of check at all
            raise TutorError(Msg("report.csv.not_ours", file=name, header=shown(first[:80]),
                                 columns=", ".join(NEEDED)))
        if missing:
            raise TutorError(Msg("report.csv.columns", file=name, columns=", ".join(missing)))
        rows = []
        for record in reader:
            if not any(v.strip() for v in record.values() if isinstance(v, str)):
                continue  # a row of empty cells (,,,,), as a spreadsheet leaves one after an edit: no submission
            if reader.line_num > MAX_ROWS + 1:
                raise TutorError(Msg("report.csv.too_long", file=name, limit=MAX_ROWS))
            try:
                rows.append(_row(record, name, reader.line_num))
            except TutorError as err:
                if bad is None:
                    raise
                bad.append(str(err))
        return rows
    except csv.Error as err:
        raise TutorError(Msg("report.csv.bad", file=name, line=reader.line_num, reason=str(err))) from None


def _row(record: dict[str, str | None], name: str, line: int) -> Row:
    def cell(column: str) -> str:  # as check wrote it: the ' before a formula's first character dropped
        value = record.get(column)
        return spreadsheet_text(value) if isinstance(value, str) else ""

    verdict = cell("verdict")
    if verdict not in (CORRECT, WRONG, UNUSABLE):
        raise TutorError(Msg("report.csv.verdict", file=name, line=line, found=verdict[:40]))
    items: list[tuple[str, bool]] = []
    for item in filter(None, (p.strip() for p in cell("steps").split(SEP))):
        place, _, said = item.rpartition(":")
        if not place or said not in (CORRECT, WRONG):
            raise TutorError(Msg("report.csv.steps", file=name, line=line, found=item[:40]))
        items.append((place_of(place), said == CORRECT))
    first = place_of(cell("first_wrong_step"))
    mistakes = tuple(dict.fromkeys(filter(None, (k.strip() for k in cell("mistakes").split(SEP)))))
    step = first.rpartition(".")[2] if first else ""  # heads[1].weights -> weights: where the first wrong step's mistakes were named
    total = cell("steps_total")
    owner = cell("variant_of")
    return Row(name, cell("student"), cell("exercise") or None, verdict, first or None, first or None, mistakes,
               sum(ok for _, ok in items), len(items), steps=tuple(items), mistake_steps=tuple(step for _ in mistakes),
               total=int(total) if total.isdigit() and len(total) < 7 else 0,
               variant_of=(owner, "") if owner else None)
