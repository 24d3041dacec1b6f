"""A class's submissions graded in one run (issue 24): one :class:`Row` per solution file.

:func:`solution_paths` turns what the command line names (files and
folders) into the solution files to grade: a folder gives its ``*.yaml`` and
``*.yml`` files, sorted by name, not its subfolders (a class's submissions sit
side by side; a nested folder is named on its own, but one named ``x.yaml``
is a row that says it is a folder).  :func:`grade` grades one
file exactly as ``check FILE`` does (the same reader, the same audit, a
``tiled:`` part judged by the judge the caller passes in: the online softmax
lives above this package) and says it as a row: the student (the file's
``student:``, else the file's name without its suffix), the exercise, the
verdict (``correct``, ``wrong``, ``unusable``), the first wrong step, the
mistakes named, the steps right out of the exercise's steps (its forward
steps, and its backward ones when the file gives any: one right step of 18 is
1/18, not full marks) and how many were given, and a comment a student can
read (the first wrong step's diagnosis).  When the folders hold a roster index
(``roster-<ID>.csv``, written by ``handouts --students``) that gives the file's
student a variant, a file that hands in another student's variant is wrong,
its comment naming whose it is and which is the student's own.  A file that cannot be graded (not
YAML, an unknown exercise, a symbolic link out of its folder, too large) is a
row with its error, never the end of the run.

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
from ..base.errors import Problem, TutorError
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
#: The suffixes of the solution files a folder is read for (compared without case).
SUFFIXES = (".yaml", ".yml")
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
    #: a roster's variant handed in by another student: ``(whose it is, the submitter's own variant)``
    variant_of: tuple[str, str] | None = None

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


def solution_paths(named: Iterable[str]) -> list[str]:
    """The solution files to grade, in order: each file as named; each folder's ``*.yaml``/``*.yml``
    entries (not hidden; a folder so named is listed, and its row says it is a folder), in the order a person sorts names (``s2`` before ``s10``, then by
    the name itself: :func:`name_order`), as ``folder/name``.  A symbolic link in a folder is
    listed and then judged by the reader (refused when it leads out of the folder).  A name that is neither
    a file nor a folder is listed as it is: its row says it cannot be read."""
    out: list[str] = []
    for name in named:
        if os.path.isdir(name):
            try:
                entries = sorted(os.listdir(name), key=name_order)
            except OSError:
                out.append(name)  # the reader says why it cannot be read
                continue
            for entry in entries:
                path = os.path.join(name, entry)
                if entry.startswith(".") or not entry.lower().endswith(SUFFIXES):
                    continue  # a folder named x.yaml is listed: its row says it is a folder
                out.append(path)
        else:
            out.append(name)
    return out


def student_of(path: str, sf: SolutionFile | None = None) -> str:
    """Who a submission is by: the file's ``student:``, else its file name without the suffix."""
    if sf is not None and sf.student:
        return sf.student
    return Path(path).stem if Path(path).suffix.lower() in SUFFIXES else Path(path).name


class Grader:
    """Grades solution files as ``check`` does, one row each, solving each exercise once per run.

    ``exercise`` (``--exercise``) overrides every file's ``exercise:``; ``folders`` are the packs
    (``--exercises``, then ``ATTN_TUTOR_PATH``) the files' exercises are found in; ``judge_tiled``
    judges a ``tiled:`` part (``None``: such a part is not graded and the file is unusable).
    """

    def __init__(self, *, exercise: str | None = None, folders: Sequence[str | Path] = (),
                 tolerance: float | None = None, judge_tiled: TiledJudge | None = None):
        self.exercise = exercise
        self.folders = list(folders)
        self.tolerance = tolerance
        self.judge_tiled = judge_tiled
        self._solved: dict[tuple[Exercise, bool], Any] = {}
        self._index: dict[str, Variant] | None = None

    def grade(self, path: str) -> Row:
        """The row of the solution file at ``path`` (see :class:`Row`); raises nothing for a bad file.  A folder
        named like a solution file is a row (unusable: a folder), never skipped in silence."""
        from .solution import load_solution

        if os.path.isdir(path):
            return Row(path, student_of(path), None, UNUSABLE, comment=Msg("batch.comment.folder"),
                       error=TutorError(Msg("batch.folder", file=path)))
        try:
            sf = load_solution(path, exercise=self.exercise, folders=self.folders)
            return self.row(path, sf)
        except TutorError as err:
            return Row(path, student_field(path) or student_of(path), None, UNUSABLE, error=err,
                       comment=Msg("batch.comment.unusable", reason=first_line(err)))

    @property
    def index(self) -> dict[str, Variant]:
        """The variants the roster indexes of :attr:`folders` list, by variant id (read once; :func:`read_index`)."""
        if self._index is None:
            self._index = read_index(self.folders)
        return self._index

    def row(self, path: str, sf: SolutionFile) -> Row:
        """The row of the parsed solution file ``sf``: its steps audited, its ``tiled:`` part judged.  A roster's
        variant handed in by a student the index gives another variant is wrong, whatever its numbers."""
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
        return other_variant(row, self.index)

    def _solution(self, sf: SolutionFile) -> Any:
        from ..steps import has_backward, solve

        backward = has_backward(g.id for g in sf.steps)
        key = (sf.exercise, backward)
        if key not in self._solved:
            self._solved[key] = solve(sf.exercise, backward=backward)
        return self._solved[key]


def first_line(err: TutorError) -> Text:
    """The first line of an error's message (an unusable file's reason, one line of a gradebook's comment),
    with how many more problems it has said after it."""
    lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
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
    """One row of a roster index: variant ``id`` is student ``student``'s, drawn like exercise ``like``."""

    id: str
    student: str
    like: str


def _index_cell(text: str) -> str:
    """A roster index's cell as the roster had it: the ``'`` written before a formula's first character dropped,
    whitespace at the ends dropped and inner runs one space (as the roster was read)."""
    return spreadsheet_text(" ".join(text.split()))


def read_index(folders: Sequence[str | Path]) -> dict[str, Variant]:
    """Every variant the roster indexes (``roster-<ID>.csv``, written by ``handouts --students``) in ``folders``
    list, by variant id; ``like`` is the ``<ID>`` of the index's name.  A file that cannot be read as an index
    (too large, not UTF-8, no ``student`` and ``exercise`` columns) is passed over: it is not one."""
    import csv

    out: dict[str, Variant] = {}
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not (name.startswith(INDEX_PREFIX) and name.endswith(INDEX_SUFFIX)):
                continue
            path = os.path.join(folder, name)
            try:
                if not os.path.isfile(path) or os.path.getsize(path) > MAX_INDEX_BYTES:
                    continue
                with open(path, encoding="utf-8-sig", newline="") as f:
                    records = list(csv.DictReader(f))
            except (OSError, UnicodeDecodeError, csv.Error):
                continue
            like = name[len(INDEX_PREFIX):-len(INDEX_SUFFIX)]
            for rec in records:
                sid, vid = rec.get("student"), rec.get("exercise")
                if isinstance(sid, str) and isinstance(vid, str) and sid.strip() and vid.strip():
                    out.setdefault(vid.strip(), Variant(vid.strip(), _index_cell(sid), like))
    return out


def other_variant(row: Row, index: dict[str, Variant]) -> Row:
    """``row`` made wrong when its exercise is a roster's variant of another student and its student has a
    variant of their own in ``index``: nothing in it was computed on that student's numbers, so no step counts
    as right, and the comment names whose variant it is and which one is the student's."""
    found = whose(row.student, row.exercise or "", index)
    if found is None:
        return row
    theirs, own = found
    return replace(row, verdict=WRONG, right=0, steps=(), first_wrong=None, first_label=None, mistakes=(),
                   mistake_steps=(), variant_of=(theirs.student, own), comment=other_variant_comment(theirs, own))


def whose(student: str, exercise: str, index: dict[str, Variant]) -> tuple[Variant, str] | None:
    """When ``exercise`` is another student's variant in ``index`` and ``student`` has a variant of the same
    exercise there: that variant and the id of the student's own; else ``None``."""
    theirs = index.get(exercise)
    if theirs is None or theirs.student == student:
        return None
    own = [v.id for v in index.values() if v.student == student and v.like == theirs.like]
    return (theirs, own[0]) if own else None


def other_variant_comment(theirs: Variant, own: str) -> Msg:
    """What the student reads when they handed in ``theirs``, another student's variant, instead of ``own``."""
    return Msg("batch.comment.other_variant", exercise=theirs.id, owner=theirs.student, own=own)


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
    """Every student named by more than one submission, with their files (in the rows' order)."""
    files: dict[str, list[str]] = {}
    for r in rows:
        files.setdefault(r.student, []).append(r.file)
    return [(s, tuple(f)) for s, f in files.items() if len(f) > 1]
