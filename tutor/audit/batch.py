"""A class's submissions graded in one run (issue 24): one :class:`Row` per solution file.

:func:`gather` turns what the command line names (files and
folders) into the solution files to grade: a folder gives its ``*.yaml`` and
``*.yml`` files (and ``*.yaml.txt``, as Notepad saves them), sorted by name, not
its subfolders (a class's submissions sit side by side; a nested folder is named
on its own, but one named ``x.yaml`` is a row that says it is a folder); what a
folder holds besides is said, never passed over in silence, and a file named
twice is graded once.  :func:`grade` grades one
file exactly as ``check FILE`` does (the same reader, the same audit, a
``tiled:`` part judged by the judge the caller passes in: the online softmax
lives above this package) and says it as a row: the student (the file's
``student:``, else the file's name without its suffix), the exercise, the
verdict (``correct``, ``wrong``, ``unusable``), the first wrong step, the
mistakes named, the steps right out of the exercise's steps (its forward
steps, and its backward ones when the file gives any: one right step of 18 is
1/18, not full marks) and how many were given, and a comment a student can
read (the first wrong step's diagnosis).  When the folders hold a roster index
(``roster-<ID>.csv``, written by ``handouts --students``), a variant counts only
for its own student (:func:`judge_copy`): a file that hands in another student's
variant, a variant or the exercise itself under a student the index does not
know (ids compared as the roster compares them, or the roster's name), or the
exercise itself by a student who has a variant of it, is wrong and no step of it
counts, its comment saying why (whose variant it is, which is the student's own).
An index that cannot be read is a warning, never passed over in silence.  A file that cannot be graded (not
YAML, an unknown exercise, a symbolic link out of its folder, too large) is a
row with its error, never the end of the run; the exercise file the submissions
name, kept beside them, is not a submission (:func:`beside`).

Pure but for reading the solution files (through :func:`tutor.audit.solution.load_solution`):
nothing here prints; the rows are data for :mod:`tutor.render.batch`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

from ..answers import ROUNDED_AWAY, TRUNCATED
from ..base.errors import Problem, TutorError, where_raised
from ..base.messages import Msg, Text
from ..base.textsafe import spreadsheet_text
from ..exercise.record import Exercise
from ..mistakes.diagnose import event, group_key, tied
from .check import INDEPENDENT, Report, StepCheck
from .plausibility import label
from .solution import SolutionFile
from .tiled_part import TiledGiven

#: The verdicts of a row, as ``check --format json`` says them for one file (``unusable``: exit code 2).
CORRECT, WRONG, UNUSABLE = "correct", "wrong", "unusable"
#: The suffixes of the solution files a folder is read for (compared without case): ``.yaml.txt`` is what
#: Notepad on Windows saves a ``.yaml`` file as by default.
SUFFIXES = (".yaml", ".yml", ".yaml.txt", ".yml.txt")
#: How many of a folder's entries that are not read are named (the rest counted).
NOT_READ_NAMED = 5
#: The key of the column ``tiled`` counts under: a ``tiled:`` part is one graded item, like a step.
TILED = "tiled"


class TiledOutcome(Protocol):
    """What a judge of a ``tiled:`` part returns (:class:`tutor.flash.check.TiledReport`)."""

    @property
    def ok(self) -> bool: ...

    @property
    def diagnoses(self) -> tuple[tuple[str, str], ...]: ...


#: ``judge(exercise, tiled part, tolerance)``: how ``check`` judges a ``tiled:`` part (:func:`tutor.flash.check.audit_tiled`).
TiledJudge = Callable[[Exercise, TiledGiven, "float | None"], TiledOutcome]


@dataclass(frozen=True)
class Row:
    """One submission, graded.

    ``file`` the path as named; ``student`` its ``student:`` or its name
    without suffix; ``exercise`` the exercise id (``None`` when the file is
    unusable before one is known); ``verdict`` :data:`CORRECT`, :data:`WRONG`
    or :data:`UNUSABLE`; ``first_wrong`` the first wrong step as the file
    writes its place (``heads[1].weights``; ``tiled`` for a wrong ``tiled:``
    part), ``first_label`` its name for a reader (``weights (head 2)``);
    ``mistakes`` the keys of the mistakes named (the first wrong step's
    mistake, then those of steps wrong on their own, then the ``tiled:``
    part's; mistakes one step cannot tell apart are one key, theirs joined by
    ``+``: :func:`tutor.mistakes.diagnose.event`); ``right`` of ``given`` the items right (each step, and a ``tiled:``
    part as one); ``comment`` the sentence for the student; ``error`` the
    :class:`TutorError` that made the file unusable.
    """

    file: str
    student: str
    exercise: str | None
    verdict: str
    first_wrong: str | None = None
    first_label: Text | None = None
    mistakes: tuple[str, ...] = ()
    right: int = 0
    given: int = 0
    comment: Text = ""
    error: TutorError | None = field(default=None, compare=False)
    #: every item given, in the file's order: its place (``heads[1].weights``, ``tiled``) and whether it is right
    steps: tuple[tuple[str, bool], ...] = ()
    #: the step id each of :attr:`mistakes` was named at (``weights``, ``tiled``), in the same order
    mistake_steps: tuple[str, ...] = ()
    #: the file's warnings (a plain ``010``), which change no verdict, as ``check FILE`` says them
    warnings: tuple[Problem, ...] = ()
    #: the steps the exercise asks for (its forward steps, with its backward ones when the file gives any;
    #: a ``tiled:`` part counts one more): what :attr:`score` is out of (``0``: unknown, then :attr:`given`)
    total: int = 0
    #: a roster's variant handed in by another student: ``(whose it is, the submitter's own variant)``, the
    #: second ``""`` for a student the roster index does not know
    variant_of: tuple[str, str] | None = None
    #: what attn-tutor raised when it failed on this file (a bug, not the student's doing): the row is
    #: unusable, its comment says so, and ``ATTN_TUTOR_DEBUG=1`` prints this traceback
    failure: Exception | None = field(default=None, compare=False)
    #: why a roster index made the row wrong (:func:`judge_copy`), whether or not the variant is someone's
    copy: Copy | None = None

    @property
    def exit_code(self) -> int:
        """What ``check FILE`` exits with for this file alone: 0 correct, 1 wrong, 2 unusable."""
        return {CORRECT: 0, WRONG: 1}.get(self.verdict, 2)

    @property
    def out_of(self) -> int:
        """What :attr:`score` is out of: :attr:`total` when known, else the items given."""
        return max(self.total, self.given)

    @property
    def score(self) -> Fraction | None:
        """The share of the exercise's steps (:attr:`out_of`) that are right (0 to 1), so one right step of 18
        is 1/18, not full marks; ``None`` for an unusable file or one with none."""
        return None if self.verdict == UNUSABLE or not self.out_of else Fraction(self.right, self.out_of)


def exit_code(rows: Sequence[Row]) -> int:
    """The run's exit code: 2 when a file is unusable, else 1 when one is wrong, else 0 (2 wins over 1)."""
    return max((r.exit_code for r in rows), default=0)


def summary(rows: Sequence[Row]) -> dict[str, int]:
    """How many submissions, and how many of each verdict: ``{"submissions", "correct", "wrong", "unusable"}``."""
    return {"submissions": len(rows), CORRECT: sum(r.verdict == CORRECT for r in rows),
            WRONG: sum(r.verdict == WRONG for r in rows), UNUSABLE: sum(r.verdict == UNUSABLE for r in rows)}


def name_order(name: str) -> tuple[tuple[tuple[int, int | str], ...], str]:
    """A key that sorts file names as a person does: runs of digits by their number, the rest case-folded,
    ties by the name itself (so the order is total).

    >>> sorted(["s10.yaml", "s2.yaml", "s1.yaml", "S3.yaml"], key=name_order)
    ['s1.yaml', 's2.yaml', 'S3.yaml', 's10.yaml']
    """
    import re

    parts = tuple((0, int(p)) if p.isdigit() else (1, p.casefold()) for p in re.split(r"(\d+)", name) if p)
    return parts, name


_PLACE = r"heads\[(\d+)\]\.(.+)"
#: How ``check.step_of_head`` reads in each language: ``scaled (head 1)``, ``scaled（第 1 个头）``.
_NAMES = (r"(?P<step>.+) \(head (?P<head>\d+)\)", r"(?P<step>.+)（第 (?P<head>\d+) 个头）")


def place_label(place: str) -> Text:
    """A step's place named for a reader in the run's language, heads counted from 1 as a student reads them
    and as the comment names them (``check.step_of_head``: ``weights (head 2)``); a layer step as it is."""
    import re

    found = re.fullmatch(_PLACE, place)
    return Msg("check.step_of_head", step=found.group(2), head=int(found.group(1)) + 1) if found else place


def place_of(name: str) -> str:
    """The place :func:`place_label` names, in either language (the file's notation, ``heads[0].scaled``); a
    place already in the file's notation is returned as it is (a CSV written before the 1-based names).

    >>> place_of("weights (head 2)"), place_of("weights（第 2 个头）"), place_of("heads[1].weights"), place_of("output")
    ('heads[1].weights', 'heads[1].weights', 'heads[1].weights', 'output')
    """
    import re

    for pattern in _NAMES:
        found = re.fullmatch(pattern, name)
        if found and int(found.group("head")) >= 1:
            return f"heads[{int(found.group('head')) - 1}].{found.group('step')}"
    return name


@dataclass(frozen=True)
class Gathered:
    """What the command line names, gathered (:func:`gather`): ``paths`` the solution files to grade, in order;
    ``not_read`` each folder with the names of its entries that are not read (subfolders, with a ``/``, and
    files of other suffixes; hidden ones aside); ``repeated`` the files named more than once (graded once)."""

    paths: tuple[str, ...]
    not_read: tuple[tuple[str, tuple[str, ...]], ...] = ()
    repeated: tuple[str, ...] = ()


def gather(named: Iterable[str]) -> Gathered:
    """The solution files to grade, in order: each file as named; each folder's ``*.yaml``/``*.yml`` entries
    (and ``*.yaml.txt``/``*.yml.txt``, as Notepad saves them; not hidden; a folder so named is listed, and its
    row says it is a folder), in the order a person sorts names (``s2`` before ``s10``, then by the name itself:
    :func:`name_order`), as ``folder/name``.  A symbolic link in a folder is listed and then judged by the
    reader (refused when it leads out of the folder).  A name that is neither a file nor a folder is listed as
    it is: its row says it cannot be read.  A path named twice (``a.yaml a.yaml``, or a folder and a file in
    it) is one file: listed once, and said in :attr:`Gathered.repeated`.  A folder's entries that are not read
    (its subfolders, files of other suffixes) are said in :attr:`Gathered.not_read`, never passed over in
    silence."""
    out: list[str] = []
    seen: set[str] = set()
    repeated: list[str] = []
    not_read: list[tuple[str, tuple[str, ...]]] = []

    def add(path: str) -> None:
        key = os.path.normcase(os.path.abspath(path))
        if key in seen:
            if path not in repeated:
                repeated.append(path)
            return
        seen.add(key)
        out.append(path)

    for name in named:
        if os.path.isdir(name):
            try:
                entries = sorted(os.listdir(name), key=name_order)
            except OSError:
                add(name)  # the reader says why it cannot be read
                continue
            passed: list[str] = []
            for entry in entries:
                path = os.path.join(name, entry)
                if entry.startswith("."):
                    continue
                if not entry.lower().endswith(SUFFIXES):
                    passed.append(entry + "/" if os.path.isdir(path) else entry)
                    continue  # a folder named x.yaml is listed: its row says it is a folder
                add(path)
            if passed:
                not_read.append((name, tuple(passed)))
        else:
            add(name)
    return Gathered(tuple(out), tuple(not_read), tuple(repeated))


def not_read_line(names: Sequence[str]) -> Msg:
    """The warning that a folder's entries ``names`` are not read: the first :data:`NOT_READ_NAMED` named, the
    rest counted, and what to do (a subfolder is named on its own)."""
    shown_names = list(names[:NOT_READ_NAMED])
    more = len(names) - len(shown_names)
    listed: Text = Msg.and_list(shown_names) if not more else \
        Msg("batch.not_read.more", names=Msg.joined("list.sep", shown_names), more=more)
    return Msg.plural("batch.not_read", len(names), names=listed)


def exercise_file_id(path: str) -> str | None:
    """The ``id`` of the exercise file at ``path`` (a file with an exercise's fields and no ``exercise:``,
    which the reader refuses as a solution), else ``None``; a symbolic link is not followed here."""
    from ..exercise.yamlread import parse_yaml, read_text
    from .solution import _exercise_fields

    if os.path.islink(path):
        return None
    try:
        text, _ = read_text(path)
        doc = parse_yaml(text, path).value if text is not None else None
    except (OSError, TutorError, ValueError):
        return None
    if not isinstance(doc, dict) or not _exercise_fields(doc):
        return None
    found = doc.get("id")
    return found.strip() if isinstance(found, str) and found.strip() else None


def beside(rows: Sequence[Row]) -> tuple[list[Row], list[tuple[str, str]]]:
    """``rows`` less the exercise files kept beside the submissions: an unusable row that is an exercise file
    (:func:`exercise_file_id`) whose ``id`` is the exercise of a row graded (``exercise: exercise.yaml``, as the
    format invites); and those files with their ids.  An exercise file no submission uses stays a row (a
    student who handed in the exercise instead of a solution gets no grade, and says so)."""
    used = {r.exercise for r in rows if r.verdict != UNUSABLE and r.exercise is not None}
    kept: list[Row] = []
    passed: list[tuple[str, str]] = []
    for r in rows:
        found = exercise_file_id(r.file) if r.verdict == UNUSABLE and r.exercise is None else None
        if found is not None and found in used:
            passed.append((r.file, found))
        else:
            kept.append(r)
    return kept, passed


def student_of(path: str, sf: SolutionFile | None = None) -> str:
    """Who a submission is by: the file's ``student:``, else its file name without the suffix."""
    if sf is not None and sf.student:
        return sf.student
    name = Path(path).name
    suffix = next((s for s in SUFFIXES if name.lower().endswith(s) and len(name) > len(s)), "")
    return name[:len(name) - len(suffix)] if suffix else name


class Grader:
    """Grades solution files as ``check`` does, one row each, solving each exercise once per run.

    ``exercise`` (``--exercise``) overrides every file's ``exercise:``; ``folders`` are the packs
    (``--exercises``, then ``ATTN_TUTOR_PATH``) the files' exercises are found in; ``judge_tiled``
    judges a ``tiled:`` part (``None``: such a part is not graded and the file is unusable).
    """

    def __init__(self, *, exercise: str | None = None, folders: Sequence[str | Path] = (),
                 tolerance: float | None = None, judge_tiled: TiledJudge | None = None,
                 student_key: Callable[[str], str] | None = None):
        self.exercise = exercise
        self.folders = list(folders)
        self.tolerance = tolerance
        self.judge_tiled = judge_tiled
        self.student_key = student_key
        self._solved: dict[tuple[Exercise, bool], Any] = {}
        self._roster: RosterIndex | None = None

    def grade(self, path: str) -> Row:
        """The row of the solution file at ``path`` (see :class:`Row`); raises nothing for a bad file.  A folder
        named like a solution file is a row (unusable: a folder), never skipped in silence; so is a file
        attn-tutor itself fails on (any other exception: unusable, its comment naming the failure as
        attn-tutor's, :attr:`Row.failure` what was raised), so that one bug costs one row, not the run."""
        from .solution import load_solution

        if os.path.isdir(path):
            return Row(path, student_of(path), None, UNUSABLE, comment=Msg("batch.comment.folder"),
                       error=TutorError(Msg("batch.folder", file=path)))
        try:
            sf = load_solution(path, exercise=self.exercise, folders=self.folders)
            return self.row(path, sf)
        except TutorError as err:
            return Row(path, student_field(path) or student_of(path), None, UNUSABLE, error=err,
                       comment=Msg("batch.comment.unusable", reason=first_line(err, path)))
        except Exception as err:  # noqa: BLE001 - attn-tutor failed on this file: a row, and the others are graded
            said = Msg("batch.internal", kind=type(err).__name__, where=where_raised(err))
            return Row(path, student_field(path) or student_of(path), None, UNUSABLE, error=TutorError(said),
                       comment=Msg("batch.comment.internal", reason=said), failure=err)

    @property
    def roster(self) -> RosterIndex:
        """The roster indexes of :attr:`folders` (read once; :func:`roster_index`, ids compared by
        :attr:`student_key`), with the problems of those that could not be read."""
        if self._roster is None:
            self._roster = roster_index(self.folders, self.student_key)
        return self._roster

    @property
    def index(self) -> dict[str, Variant]:
        """The variants the roster indexes of :attr:`folders` list, by variant id (:attr:`roster`)."""
        return self.roster.variants

    def row(self, path: str, sf: SolutionFile) -> Row:
        """The row of the parsed solution file ``sf``: its steps audited, its ``tiled:`` part judged.  A roster's
        variant handed in by a student the index gives another variant, or does not know, and the exercise
        itself handed in by a student with a variant of it, are wrong, whatever their numbers (:func:`judge_copy`)."""
        from .check import audit

        solution = self._solution(sf) if sf.steps else None
        report = audit(sf, solution, tolerance=self.tolerance) if sf.steps else None
        tiled = None
        if sf.tiled is not None:
            if self.judge_tiled is None:
                raise TutorError(Msg("batch.no_tiled_judge"))
            tiled = self.judge_tiled(sf.exercise, sf.tiled, self.tolerance)
        row = from_reports(path, sf, report, tiled)
        total = (len(solution.steps) if solution is not None else 0) + (tiled is not None)
        row = replace(row, total=total)
        if row.verdict == CORRECT and row.given < total:  # a "correct" row whose score is not 100: said why
            row = replace(row, comment=Msg("batch.comment.right_missing", given=row.given, total=total,
                                           missing=total - row.given))
        return other_variant(row, self.roster)

    def _solution(self, sf: SolutionFile) -> Any:
        from ..steps import has_backward, solve

        backward = has_backward(g.id for g in sf.steps)
        key = (sf.exercise, backward)
        if key not in self._solved:
            self._solved[key] = solve(sf.exercise, backward=backward)
        return self._solved[key]


def first_line(err: TutorError, file: str | None = None) -> Text:
    """The first line of an error's message (an unusable file's reason, one line of a gradebook's comment),
    with how many more problems it has said after it.  ``file``: the path the error names the file by, said
    by the file's name alone (the comment goes back to the student: never the grader's folders)."""
    lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
    if file:
        lines = [line.replace(file, os.path.basename(file) or file) for line in lines]
    if len(lines) == 1:
        return lines[0]
    return Msg.plural("batch.more_problems", len(lines) - 1, first=lines[0])


def _first_comment(fw: StepCheck, name: Text) -> Text:
    """What the student reads about the first wrong step ``fw`` (named ``name``): its shape when that is wrong,
    else its first diagnosis, else the note that explains it (an exact number for a rounded value, a decimal
    cut off), else that no known misconception explains it -- what ``check FILE`` shows first there."""
    if not fw.shape_ok:
        return Msg("batch.comment.shape", step=name, found=_dims(fw.given.shape), expected=_dims(fw.expected.shape))
    alike = tied(fw.diagnoses)
    if alike > 1:  # mistakes that give the very same numbers here: named together, none of them as the cause
        items = [Msg("batch.comment.alike.item", n=n, message=d.message) for n, d in enumerate(fw.diagnoses[:alike], 1)]
        return Msg("batch.comment.first.alike", step=name, count=alike, diagnoses=Msg.sentences(items))
    explained = [d.message for d in fw.diagnoses] + [note for _, note in fw.exact_claims] + \
        [note for key, _, note in fw.notes if key in (TRUNCATED, ROUNDED_AWAY)]
    if explained:
        return Msg("batch.comment.first", step=name, diagnosis=explained[0])
    return Msg("batch.comment.unexplained", step=name)


#: The notes on entries written as NaN (:func:`tutor.audit.check.audit`): facts about those entries, each its own.
_NAN = ("nan", "nan_empty_row")


def _events(s: StepCheck) -> list[str]:
    """The mistakes a wrong step counts as: its mistake (:func:`tutor.mistakes.diagnose.event`: the first
    diagnosis and those that give its very numbers, one key), after the notes that explain it (a NaN's), never
    several mistakes for one wrong matrix."""
    notes = [d.key for d in s.diagnoses if d.key in _NAN]
    found = event([d for d in s.diagnoses if d.key not in _NAN])
    return notes + ([found] if found else [])


def _dims(shape: tuple[int, ...]) -> str:
    return f"[{shape[0]}×{shape[1]}]"


def from_reports(path: str, sf: SolutionFile, report: Report | None, tiled: TiledOutcome | None) -> Row:
    """The row of ``sf`` from its audit (``None`` without steps) and its ``tiled:`` part's outcome (``None``
    without one); its verdict is ``check FILE``'s: wrong when either is."""
    ex = sf.exercise
    right = given = 0
    mistakes: list[tuple[str, str]] = []
    items: list[tuple[str, bool]] = []
    first: str | None = None
    first_label: Text | None = None
    comment: Text = ""
    if report is not None:
        given += len(report.steps)
        right += sum(s.ok for s in report.steps)
        items += [(s.given.field, s.ok) for s in report.steps]
        fw = report.first_wrong
        if fw is not None:
            first, first_label = fw.given.field, label(ex, *fw.key)
            mistakes += [(key, fw.given.id) for key in _events(fw)]
            comment = _first_comment(fw, first_label)
        for s in report.steps:
            if s is not fw and s.follows == INDEPENDENT:
                mistakes += [(key, s.given.id) for key in _events(s)]
        if fw is None and not report.ok:  # every step right, a plausibility check failed
            bad = next(f for f in report.findings if not f.ok)
            comment = Msg("batch.comment.plausibility", message=bad.message)
    wrong = report is not None and not report.ok
    if tiled is not None:
        given += 1
        right += tiled.ok
        items.append((TILED, tiled.ok))
        if tiled.diagnoses:  # the mistakes that fit its first wrong quantity: one error, as practice records it
            mistakes.append((group_key([key for key, _ in tiled.diagnoses]), TILED))
        if not tiled.ok:
            wrong = True
            if first is None:
                first, first_label = TILED, TILED
                said = [Msg(f"diagnose.{key}") for key, _ in tiled.diagnoses]
                comment = (Msg("batch.comment.first", step=TILED, diagnosis=said[0]) if len(said) == 1 else
                           Msg("batch.comment.first.fits", step=TILED, count=len(said), diagnoses=Msg.sentences(
                               [Msg("batch.comment.alike.item", n=n, message=m) for n, m in enumerate(said, 1)]))
                           if said else Msg("batch.comment.unexplained", step=TILED))
    if not wrong:
        comment = Msg.plural("batch.comment.right", given)
    seen: dict[str, str] = {}
    for key, step in mistakes:
        seen.setdefault(key, step)
    return Row(path, student_of(path, sf), ex.id, WRONG if wrong else CORRECT, first, first_label, tuple(seen),
               right, given, comment, steps=tuple(items), mistake_steps=tuple(seen.values()), warnings=sf.warnings)


# --- a roster's variants (issue 24, item 3: handouts --students) ------------------------------------

#: The roster index ``handouts --students`` writes beside the variants: ``roster-<ID>.csv``.
INDEX_PREFIX, INDEX_SUFFIX = "roster-", ".csv"
#: The largest index read (a thousand students' rows are about 300 kB).
MAX_INDEX_BYTES = 2_000_000


@dataclass(frozen=True)
class Variant:
    """One row of a roster index: variant ``id`` is student ``student``'s (``name``: the roster's name
    column, ``""`` when it has none), drawn like exercise ``like``."""

    id: str
    student: str
    like: str
    name: str = ""


def _plain(text: str) -> str:
    """``text`` with whitespace at its ends dropped and inner runs one space, case-folded: how a name is
    compared (and an id, when no ``key`` of the roster's is given)."""
    return " ".join(text.split()).casefold()


#: The verdicts of a roster index on a submission (:func:`judge_copy`): another student's variant; the
#: exercise or a variant of it handed in by a student the index does not know; the exercise a class was given
#: variants of, handed in by a student who has one.
OTHER_VARIANT, NOT_ON_ROSTER, BASE_EXERCISE = "other_variant", "not_on_roster", "base_exercise"


@dataclass(frozen=True)
class Copy:
    """Why a roster index makes a submission of ``exercise`` by ``student`` wrong (:func:`judge_copy`): ``kind``
    one of :data:`OTHER_VARIANT`, :data:`NOT_ON_ROSTER`, :data:`BASE_EXERCISE`; ``owner`` whose variant
    ``exercise`` is (``None`` for the exercise the variants were drawn like); ``own`` the student's own variant
    (``None`` for a student the index does not know); ``like`` the exercise the variants were drawn like."""

    kind: str
    student: str
    exercise: str
    owner: str | None
    own: str | None
    like: str

    def comment(self) -> Msg:
        """What the student reads about it (the row's comment)."""
        return self._said("batch.comment")

    def verdict_line(self) -> Msg:
        """What ``check FILE`` says below the report of the steps (they were checked against ``exercise``)."""
        return self._said("check")

    def _said(self, prefix: str) -> Msg:
        """The sentence of this kind under ``prefix`` (``batch.comment``: the row's comment; ``check``: the verdict)."""
        if self.kind == OTHER_VARIANT:
            return Msg(f"{prefix}.other_variant", exercise=self.exercise, owner=self.owner, own=self.own)
        if self.kind == BASE_EXERCISE:
            return Msg(f"{prefix}.base_exercise", exercise=self.exercise, own=self.own)
        if self.owner is not None:
            return Msg(f"{prefix}.not_on_roster", exercise=self.exercise, owner=self.owner, student=self.student)
        return Msg(f"{prefix}.not_on_roster.base", exercise=self.exercise, student=self.student)

    def as_dict(self) -> dict[str, str | None]:
        """``{"kind", "owner", "own", "like"}``: the JSON of ``check`` says it so."""
        return {"kind": self.kind, "owner": self.owner, "own": self.own, "like": self.like}


@dataclass(frozen=True)
class RosterIndex:
    """The roster indexes of some folders read (:func:`roster_index`): ``variants`` by variant id, and
    ``problems``, one for each index that could not be read (a warning: its copies are not found).

    ``key`` is how a student id is compared with the roster's (``handouts`` passes the roster's own rule: two
    ids the roster would refuse as one slug are one student); without it, ids are compared with whitespace
    runs as one space and case folded."""

    variants: dict[str, Variant] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    key: Callable[[str], str] | None = None

    def likes(self) -> set[str]:
        """The exercises the indexes give variants of."""
        return {v.like for v in self.variants.values()}

    def mine(self, student: str, like: str) -> list[Variant]:
        """The variants of ``like`` that are ``student``'s: by the student id (compared as the roster compares
        them, :attr:`key`), else by the roster's name column (whitespace and case aside; a name two students
        share gives both)."""
        of_like = [v for v in self.variants.values() if v.like == like]
        key = self.key or _plain
        wanted = key(" ".join(student.split()))
        by_id = [v for v in of_like if key(v.student) == wanted]
        if by_id:
            return by_id
        named = _plain(student)
        return [v for v in of_like if v.name and _plain(v.name) == named]


def _index_cell(text: str) -> str:
    """A roster index's cell as the roster had it: the ``'`` written before a formula's first character dropped,
    whitespace at the ends dropped and inner runs one space (as the roster was read)."""
    return spreadsheet_text(" ".join(text.split()))


def roster_index(folders: Sequence[str | Path], key: Callable[[str], str] | None = None) -> RosterIndex:
    """Every variant the roster indexes (``roster-<ID>.csv``, written by ``handouts --students``) in ``folders``
    list, by variant id; ``like`` is the ``<ID>`` of the index's name.  An index that cannot be read (not a
    regular file, over 1,000,000 bytes, not UTF-8 -- saved again by a spreadsheet in a local encoding --, not
    CSV, without its ``student`` or ``exercise`` column) is a problem of :attr:`RosterIndex.problems`, never
    passed over without a word: without it, the copies of its variants are not found."""
    import csv
    import io

    from ..exercise.yamlread import read_text

    out: dict[str, Variant] = {}
    problems: list[Problem] = []

    def unread(file: str, line: int | None, column: int | None, reason: Text, hint: Text = "") -> None:
        problems.append(Problem(file, line, None if line is None else column, "", Msg("batch.index.unread", reason=reason),
                                hint))

    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not (name.startswith(INDEX_PREFIX) and name.endswith(INDEX_SUFFIX)):
                continue
            path = os.path.join(folder, name)
            text, found = read_text(path)
            if text is None:
                for p in found:
                    unread(p.file, p.line, p.column, p.message, p.hint)
                continue
            reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
            records: list[dict[Any, Any]] = []
            start = 1  # the line the row being read starts on
            try:
                if reader.fieldnames is not None:  # the header row read
                    start = reader.line_num + 1
                for rec in reader:
                    records.append(rec)
                    start = reader.line_num + 1
            except csv.Error:  # Python's words: the roster's own sentence is said instead
                unread(path, start, None, Msg("handouts.roster.bad_csv"))
                continue
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in ("student", "exercise") if c not in header]
            if missing:
                unread(path, 1, None, Msg.plural("batch.index.columns", len(missing), columns=Msg.and_list(missing)),
                       Msg("batch.index.columns.hint"))
                continue
            like = name[len(INDEX_PREFIX):-len(INDEX_SUFFIX)]
            for rec in records:
                rec = {(k or "").strip(): v for k, v in rec.items()}
                sid, vid, called = rec.get("student"), rec.get("exercise"), rec.get("name")
                if isinstance(sid, str) and isinstance(vid, str) and sid.strip() and vid.strip():
                    out.setdefault(vid.strip(), Variant(vid.strip(), _index_cell(sid), like,
                                                        _index_cell(called) if isinstance(called, str) else ""))
    return RosterIndex(out, tuple(problems), key)


def read_index(folders: Sequence[str | Path]) -> dict[str, Variant]:
    """The variants of :func:`roster_index` (its problems left aside), by variant id."""
    return roster_index(folders).variants


def judge_copy(student: str, exercise: str, index: RosterIndex) -> Copy | None:
    """Why ``index`` makes ``student``'s submission of ``exercise`` wrong, or ``None`` when it does not.

    A roster's variant counts only for its own student (:meth:`RosterIndex.mine`): another student's is
    :data:`OTHER_VARIANT`; one handed in by a student the index does not know is :data:`NOT_ON_ROSTER` (a copy
    with the ``student:`` changed to a name not on the roster).  The exercise the variants were drawn like,
    handed in by a student who has a variant of it, is :data:`BASE_EXERCISE` (its numbers are not the
    student's); by a student the index does not know, :data:`NOT_ON_ROSTER`.  Any other exercise: ``None``."""
    theirs = index.variants.get(exercise)
    if theirs is not None:
        mine = index.mine(student, theirs.like)
        if any(v.id == theirs.id for v in mine):
            return None
        if not mine:
            return Copy(NOT_ON_ROSTER, student, exercise, theirs.student, None, theirs.like)
        return Copy(OTHER_VARIANT, student, exercise, theirs.student, mine[0].id, theirs.like)
    if exercise in index.likes():
        mine = index.mine(student, exercise)
        return Copy(BASE_EXERCISE if mine else NOT_ON_ROSTER, student, exercise, None,
                    mine[0].id if mine else None, exercise)
    return None


def other_variant(row: Row, index: RosterIndex) -> Row:
    """``row`` made wrong when ``index`` says so (:func:`judge_copy`): nothing in it was computed on that
    student's numbers, so no step counts as right, and the comment says why (whose variant it is and which one
    is the student's)."""
    found = judge_copy(row.student, row.exercise or "", index)
    if found is None:
        return row
    owner = (found.owner, found.own or "") if found.owner is not None else None
    return replace(row, verdict=WRONG, right=0, steps=(), first_wrong=None, first_label=None, mistakes=(),
                   mistake_steps=(), variant_of=owner, copy=found, comment=found.comment())


def student_field(path: str) -> str | None:
    """The ``student:`` of a file that cannot be graded, when it can still be read: the file read with the
    project's YAML loader (a mapping with a text ``student``), else a top-level ``student: NAME`` line of its
    text (a YAML mistake further down leaves it readable); ``None`` otherwise, and for a symbolic link (never
    followed here, where the reader's checks of its target do not run)."""
    import re

    from ..exercise.yamlread import read_text

    if os.path.islink(path):  # the reader refuses a link out of its folder: nothing is read through one here
        return None
    try:
        text, _ = read_text(path)
    except (OSError, TutorError, ValueError):
        return None
    if text is None:
        return None
    from ..exercise.yamlread import parse_yaml

    doc = parse_yaml(text, path).value
    if isinstance(doc, dict):
        value = doc.get("student")
        return " ".join(value.split())[:200] if isinstance(value, str) and value.strip() else None
    found = re.search(r"^student:[ \t]*(['\"]?)([^'\"#\n]+?)\1[ \t]*(#.*)?$", text, re.MULTILINE)
    return " ".join(found.group(2).split())[:200] if found else None


def duplicates(rows: Sequence[Row]) -> list[tuple[str, tuple[str, ...]]]:
    """Every student named by more than one submission (``Ann`` and `` ann`` are one: whitespace runs as one
    space, case folded), as the first of them names them, with their files (in the rows' order)."""
    files: dict[str, tuple[str, list[str]]] = {}
    for r in rows:
        files.setdefault(_plain(r.student), (r.student, []))[1].append(r.file)
    return [(s, tuple(f)) for s, f in files.values() if len(f) > 1]
