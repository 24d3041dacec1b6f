"""Per-student variants (issue 24, item 3): ``attn-tutor handouts --like ID --students ROSTER.csv -o DIR``.

For each student of a roster: an exercise with the shape of exercise ``ID``
and fresh numbers (:func:`tutor.authoring.generate.like`, the machinery of
``new --like``) drawn from a seed derived from the exercise and the student,
and its blank worksheet (what ``explain VARIANT --blank --export FILE``
writes); and, in the same folder, an index of what was written
(``roster-ID.csv``).  A student who copies another's numbers is then graded
against their own variant (``check SUBMISSION --exercises DIR``) and is wrong.

The seed (:func:`seed_of`): the first 4 bytes, read big-endian, of the
SHA-256 of the UTF-8 bytes of ``f"{exercise_id}\\0{student_id}"`` (``0`` to
``2**32 - 1``), where ``exercise_id`` is the id of exercise ``ID`` and
``student_id`` the roster's cell as read (whitespace at its ends dropped,
inner runs of whitespace one space); should the numbers of that seed be
those of a student above in the roster, the seed of ``f"{student_id}\\0{k}"``
for ``k = 1, 2, ...`` instead, so that no two students share their numbers.
It is written in the exercise (its
first comment and its description) and so on the worksheet; the index gives
the command that writes one variant again, byte for byte
(``attn-tutor new --like ID --seed N --id VARIANT --student NAME``, and ``--lang``
in a run in another language than English: the title is English in ``title:``
and in the run's language in the file's translation).

The roster (:func:`parse_roster`): UTF-8 with or without a byte order mark,
commas or semicolons (whichever the header row has more of), a header row
naming a student id column -- the first of :data:`ID_COLUMNS` present, in
any case (``SIS ID`` is ``sis_id``, ``学号`` too), or the one named -- and, when it has
one, a column of names that the variant's title names (the first of :data:`NAME_COLUMNS`
present, ``姓名`` too, or the one named).  A variant's id is
``ID-<slug>`` (:func:`student_slug`: the id's ASCII letters and digits, accents
dropped, every other run of characters one ``-``; for an id with no ASCII
letter or digit, such as ``张伟``, ``s-`` and the first 8 hex digits of the
SHA-256 of its UTF-8 bytes), safe as a file name and as an exercise id.
Every bad row is one problem naming its line: an empty id, an id seen on an
earlier row, two ids with the same slug (a collision to resolve, never a file
overwritten), a control character, a cell too long, more than
:data:`MAX_STUDENTS` students.

Nothing is written unless everything can be (:func:`write_handouts`): every
variant is drawn and every target checked first (an existing file only with
``force``, never one that is not a regular file), the files are written into
a temporary folder beside or inside ``DIR`` and only then moved into it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import secrets
import shlex
import shutil
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import Problem, TutorError
from ..base.messages import t
from ..base.textsafe import spreadsheet_cell

if TYPE_CHECKING:
    from ..exercise.record import Exercise

#: The headers a student id column may have, the first present chosen (compared in lower case, with spaces
#: and hyphens as underscores): those of the first rosters, then a Chinese 教务系统's (学号) and Canvas's.
ID_COLUMNS = ("student", "id", "email", "sis_id", "login", "student_id", "sis_user_id", "学号")
#: The headers the optional column of names may have, the first present chosen as :data:`ID_COLUMNS` is (the
#: variant's title says whose it is with it).
NAME_COLUMNS = ("name", "姓名", "student_name")
#: The most students one roster may have (each variant is drawn and solved: about 0.05 s each).
MAX_STUDENTS = 1000
#: The longest student id or name, in characters.
MAX_CELL = 200
#: The longest slug of a student id in a variant's id (the id itself has at most 64 characters).
SLUG_LENGTH = 32
#: How many seeds a student's variant is drawn from at most while its numbers are another student's (never
#: seen on the bundled shapes: 300 draws each gave 300 different exercises).
SAME_NUMBERS_TRIES = 20
#: The worksheets ``handouts`` writes, by ``--worksheet``: the suffix of what ``explain --blank --export`` writes.
WORKSHEETS = {"markdown": ".md", "html": ".html"}
#: The index's header row (names, not sentences: a script or a spreadsheet reads them).
INDEX_COLUMNS = ("student", "name", "exercise", "seed", "exercise_file", "worksheet_file", "command")


class RosterError(TutorError):
    """A roster that cannot be used: every problem found, each naming its line (``roster.csv:4: ...``)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Student:
    """One row of a roster: the student's id and name as read, the line the row starts on, and its slug."""

    id: str
    name: str  # "" when the roster has no name column or the cell is empty
    line: int
    slug: str

    @property
    def called(self) -> str:
        """What the variant's title calls the student: the name, else the id."""
        return self.name or self.id


@dataclass(frozen=True)
class Roster:
    """A roster read: ``column`` is the id column's header as written, ``students`` in the roster's order."""

    file: str
    column: str
    students: tuple[Student, ...]


def seed_of(exercise_id: str, student_id: str) -> int:
    """The seed of a student's variant: the first 4 bytes of ``sha256(f"{exercise_id}\\0{student_id}")``
    (UTF-8), big-endian: ``0 <= seed < 2**32``; the same for the same pair on every machine and run.

    >>> seed_of("single-head-3x4", "ana@uni.example")
    3573087890
    """
    digest = hashlib.sha256(f"{exercise_id}\0{student_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def slug(text: str) -> str:
    """``text`` as a file name's and an exercise id's part: accents dropped (``é`` -> ``e``), ASCII letters
    in lower case and digits kept, every other run of characters one ``-``, none at the ends, at most
    :data:`SLUG_LENGTH` characters; ``""`` when nothing is left (an id of Chinese characters alone).

    >>> slug("Ana.López@uni.example"), slug("../../etc/passwd"), slug("张伟")
    ('ana-lopez-uni-example', 'etc-passwd', '')
    """
    plain = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    out = re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")
    return out[:SLUG_LENGTH].rstrip("-")


def student_slug(student_id: str) -> str:
    """A student's part of a variant's id and file names: :func:`slug` of ``student_id``, else (an id with no
    ASCII letter or digit) ``s-`` and the first 8 hex digits of the SHA-256 of its UTF-8 bytes.

    >>> student_slug("Ana.López@uni.example"), student_slug("张伟")
    ('ana-lopez-uni-example', 's-a3a0bafd')
    """
    return slug(student_id) or "s-" + hashlib.sha256(student_id.encode()).hexdigest()[:8]


def variant_id(exercise_id: str, student_slug: str) -> str:
    """``single-head-3x4-ana``: exercise ``exercise_id``'s id cut so that ``-<slug>`` fits in 64 characters."""
    return f"{exercise_id[:64 - 1 - len(student_slug)].rstrip('-')}-{student_slug}"


# --- the roster --------------------------------------------------------------------------------


def _header_key(cell: str) -> str:
    return re.sub(r"[\s-]+", "_", cell.strip().casefold())


def _unsafe(text: str) -> str | None:
    """The first character of ``text`` a terminal acts on or hides (whitespace aside), named; else ``None``."""
    from ..base.textsafe import is_unsafe
    from ..exercise.yamlread import codepoint

    return next((codepoint(ch) for ch in text if is_unsafe(ch) and not ch.isspace()), None)


def read_roster(path: Path, display: str, column: str | None = None, name_column: str | None = None) -> Roster:
    """The roster in file ``path`` (``display`` names it in problems): :func:`parse_roster` of its text.

    Raises :class:`RosterError` for a file that cannot be read (missing, not a regular file, over
    1,000,000 bytes, not UTF-8: :func:`tutor.exercise.yamlread.read_text`) or a roster that cannot be used.
    """
    from ..exercise.yamlread import read_text

    text, problems = read_text(str(path), display)
    if text is None:  # a roster Excel saved on Chinese Windows is GBK: say how to save it as UTF-8 from there
        raise RosterError([replace(p, hint=t("handouts.roster.excel_hint")) if str(p.hint) == t("file.not_utf8.hint")
                           else p for p in problems])
    return parse_roster(text, display, column, name_column)


def parse_roster(text: str, file: str, column: str | None = None, name_column: str | None = None) -> Roster:
    """The students of a roster's ``text`` (a byte order mark already dropped), in its order; blank rows
    are skipped.  ``column``: the id column's header (any case), else the first of :data:`ID_COLUMNS`;
    ``name_column``: the names' (a header the row must have), else the first of :data:`NAME_COLUMNS`, if any.

    Raises :class:`RosterError` with every problem, each at its line (see the module docstring).
    """
    if "\0" in text:  # the csv module stops at a NUL: said as any other control character, at its line
        line = text.count("\n", 0, text.index("\0")) + 1
        raise RosterError([Problem(file, line, None, "", t("handouts.roster.unsafe.line", char=_unsafe("\0")))])
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error:
        raise RosterError([Problem(file, 1, None, "", t("handouts.roster.bad_csv"))]) from None
    names = [" ".join(h.split()) for h in header or []]
    keys = [_header_key(h) for h in names]
    if not any(names):
        raise RosterError([Problem(file, 1, None, "", t("handouts.roster.no_header", columns=", ".join(ID_COLUMNS)))])
    wanted = [_header_key(column)] if column is not None else list(ID_COLUMNS)
    at = next((keys.index(k) for k in wanted if k in keys), None)
    found = ", ".join(n for n in names if n) or "—"
    if at is None:
        if column is not None:
            message = t("handouts.roster.no_column", column=column, found=found)
        else:  # the command that would work: the first header that is not one of names
            suggest = next((n for n, k in zip(names, keys, strict=True) if n and k not in NAME_COLUMNS),
                           next(n for n in names if n))
            message = t("handouts.roster.no_id_column", found=found, columns=", ".join(ID_COLUMNS),
                        suggest=suggest if re.fullmatch(r"[\w.@+-]+", suggest) else shlex.quote(suggest))
        raise RosterError([Problem(file, 1, None, "", message)])
    id_header = names[at]
    wanted_names = [_header_key(name_column)] if name_column is not None else list(NAME_COLUMNS)
    named = next((keys.index(k) for k in wanted_names if k in keys and (name_column is not None or keys.index(k) != at)),
                 None)
    if named is None and name_column is not None:
        raise RosterError([Problem(file, 1, None, "", t("handouts.roster.no_column", column=name_column, found=found))])
    problems: list[Problem] = []
    students: list[Student] = []
    seen: dict[str, Student] = {}
    slugs: dict[str, Student] = {}
    last = reader.line_num
    while True:
        start = last + 1
        try:
            row = next(reader, None)
        except csv.Error as err:
            message = (t("handouts.roster.too_long", column=id_header, limit=MAX_CELL)
                       if "larger than field limit" in str(err) else t("handouts.roster.bad_csv"))
            problems.append(Problem(file, start, None, "", message))
            break
        if row is None:
            break
        last = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(students) + len(problems) >= MAX_STUDENTS:
            problems.append(Problem(file, start, None, "", t("handouts.roster.too_many", limit=MAX_STUDENTS)))
            break
        raw_id = row[at] if at < len(row) else ""
        raw_name = row[named] if named is not None and named < len(row) else ""
        name_header = names[named] if named is not None else ""
        wrong = _row_problem(raw_id, raw_name, id_header, name_header, seen, slugs)
        if wrong is not None:
            problems.append(Problem(file, start, None, "", wrong))
            continue
        sid, name = " ".join(raw_id.split()), " ".join(raw_name.split())
        student = Student(sid, name, start, student_slug(sid))
        seen[sid] = slugs[student.slug] = student
        students.append(student)
    if problems:
        raise RosterError(problems)
    if not students:
        raise RosterError([Problem(file, None, None, "", t("handouts.roster.no_students", column=id_header))])
    return Roster(file, id_header, tuple(students))


def _row_problem(raw_id: str, raw_name: str, id_header: str, name_header: str, seen: dict[str, Student],
                 slugs: dict[str, Student]) -> str | None:
    """What is wrong with a row whose id and name cells are ``raw_id``, ``raw_name`` (``seen``: the students
    of the rows above by id, ``slugs`` by slug), in one sentence; ``None`` when nothing is."""
    for header, cell in ((id_header, raw_id), (name_header, raw_name)):
        if (char := _unsafe(cell)) is not None:
            return t("handouts.roster.unsafe", column=header, char=char)
    sid, name = " ".join(raw_id.split()), " ".join(raw_name.split())
    if not sid:
        return t("handouts.roster.empty_id", column=id_header)
    for header, cell in ((id_header, sid), (name_header, name)):
        if len(cell) > MAX_CELL:
            return t("handouts.roster.too_long", column=header, limit=MAX_CELL)
    if sid in seen:
        return t("handouts.roster.duplicate", id=sid, line=seen[sid].line)
    s = student_slug(sid)
    if s in slugs:
        return t("handouts.roster.collision", id=sid, other=slugs[s].id, line=slugs[s].line, slug=s)
    return None


# --- the variants ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One student's variant: its id, seed, title, the exercise file's text, the exercise it is, and the
    command that writes it again."""

    student: Student
    id: str
    seed: int
    title: str
    text: str
    exercise: Exercise
    command: str

    def files(self, worksheet: str) -> tuple[str, str]:
        """The names of its exercise file and its worksheet (``worksheet``: a key of :data:`WORKSHEETS`)."""
        return f"{self.id}.yaml", f"{self.id}{WORKSHEETS[worksheet]}"


def draw_variants(ex: Exercise, roster: Roster, *, source: str | None = None, folder: Path | None = None) -> list[Variant]:
    """Every student's variant of ``ex``, in the roster's order (deterministic: the same roster and
    exercise give the same texts, in the same language).

    ``source`` names ``ex`` in the commands written (its file and pack options, quoted for a shell), when its
    id alone would not find it; ``folder``, where the files will be (the exercise's source, as a page names it:
    ``explain --exercises FOLDER`` names the same).  The title is ``handouts.title`` in English, and in the
    run's language in the file's translation (``new --like ID --student NAME``).  Raises
    :class:`~tutor.base.errors.ShapeError` when ``ex`` is not drawn afresh (format v2, MLA: as
    ``new --like``), :class:`RosterError` when a variant's id is a bundled exercise's (reserved), and
    :class:`TutorError` when :data:`SAME_NUMBERS_TRIES` seeds all draw numbers another student has.
    """
    from ..exercise import validate_text
    from ..exercise.catalog import bundled_ids
    from .generate import like, like_command

    reserved = bundled_ids()
    clashes = [Problem(roster.file, s.line, None, "", t("handouts.roster.reserved", id=s.id, variant=vid))
               for s in roster.students if (vid := variant_id(ex.id, s.slug)) in reserved]
    if clashes:
        raise RosterError(clashes)
    out = []
    taken: set[str] = set()  # the numbers of the variants drawn so far
    for student in roster.students:
        vid = variant_id(ex.id, student.slug)
        for again in range(SAME_NUMBERS_TRIES):
            seed = seed_of(ex.id, student.id if again == 0 else f"{student.id}\0{again}")
            text = like(ex, seed, id=vid, source=source, student=student.called)
            checked = validate_text(text, str(folder / f"{vid}.yaml") if folder is not None else f"{vid}.yaml")
            if checked.exercise is None:  # the generator's numbers are valid; a title or id would be refused here
                raise TutorError("\n".join(str(p) for p in checked.problems))
            numbers = _numbers(checked.exercise)
            if numbers not in taken:
                break
        else:  # the shape has too few different exercises for this class: refused, never two variants alike
            raise TutorError(t("handouts.same_numbers", id=ex.id, n=len(taken), student=student.id, tries=SAME_NUMBERS_TRIES))
        taken.add(numbers)
        command = like_command(source or ex.id, seed, id=vid, student=student.called)  # the file's own command
        out.append(Variant(student, vid, seed, checked.exercise.title, text, checked.exercise, command))
    return out


def _numbers(ex: Exercise) -> str:
    """What a variant computes from (its inputs, weights, biases, masks, cache), as one text to compare."""
    return repr((ex.x, ex.x_kv, ex.heads, ex.w_o, ex.b_o, ex.mask_kind, ex.mask, ex.key_padding))


def index_text(variants: Sequence[Variant], worksheet: str) -> str:
    """The index (``roster-ID.csv``): a header row (:data:`INDEX_COLUMNS`) and one row per variant, UTF-8
    with commas, the files named relative to the folder.  A student's id or name that a spreadsheet would
    take for a formula (``=``, ``+``, ``-``, ``@`` first) is written behind a ``'``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(INDEX_COLUMNS)
    for v in variants:
        exercise_file, worksheet_file = v.files(worksheet)
        writer.writerow([spreadsheet_cell(v.student.id), spreadsheet_cell(v.student.name), v.id, v.seed, exercise_file, worksheet_file,
                         v.command])
    return buffer.getvalue()


def index_name(ex: Exercise) -> str:
    """The index's file name: ``roster-ID.csv`` (a folder may hold the variants of several exercises)."""
    return f"roster-{ex.id}.csv"


# --- writing -----------------------------------------------------------------------------------


def write_handouts(ex: Exercise, variants: Sequence[Variant], out: Path, *, worksheet: str = "markdown",
                   force: bool = False) -> list[str]:
    """Write every variant's exercise file and worksheet, and the index, into folder ``out`` (made if
    missing); returns the names written, the index last.

    Nothing is written unless everything can be: every target is checked first
    (:func:`tutor.base.outfile.check_target`: an existing file only with ``force``, never one that is
    not a regular file), every worksheet is solved, checked by both engines
    (:func:`tutor.production.verify.verify`) and rendered as ``explain --blank --export`` renders it, the
    files are written into a temporary folder and then moved into ``out`` (or the temporary folder
    renamed ``out`` when ``out`` did not exist).  Raises :class:`TutorError` (exit 2) naming the path
    refused or the reason the system gave.
    """
    from ..base.outfile import check_target, file_kind, os_reason, write_file
    from ..production.verify import verify
    from ..steps import solve
    from .validate import export_handout

    names = [name for v in variants for name in v.files(worksheet)] + [index_name(ex)]
    if os.path.lexists(out) and not out.is_dir():
        try:
            mode = os.stat(out).st_mode
            kind = t("handouts.kind.file") if stat.S_ISREG(mode) else file_kind(mode)
        except OSError:  # a broken link, a loop of links
            kind = t("file.kind.special")
        raise TutorError(t("handouts.not_folder", path=out, kind=kind))
    for name in names:
        check_target(out / name, force=force)
    existed = out.is_dir()
    parent = out if existed else out.parent
    made = [p for p in [parent, *parent.parents] if not os.path.lexists(p)]  # the folders made here, deepest first
    done = False
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".attn-tutor-handouts-{secrets.token_hex(4)}"
        tmp.mkdir()
    except OSError as err:
        _remove_empty(made)
        raise TutorError(t("new.unwritable", path=out, reason=os_reason(err))) from None
    try:
        for v in variants:
            exercise_file, worksheet_file = v.files(worksheet)
            write_file(tmp / exercise_file, v.text, force=False)
            sol = solve(v.exercise)
            verify(sol)  # as explain does, before anything is printed
            export_handout(sol, tmp / worksheet_file, head=None, precision=4, blank=True, student=v.student.id)
        write_file(tmp / names[-1], index_text(variants, worksheet), force=False)
        if not existed:
            try:
                os.rename(tmp, out)
                done = True
                return names
            except OSError:  # out appeared meanwhile: moved file by file below
                out.mkdir(parents=True, exist_ok=True)
        _move(tmp, out, names, force=force)
        done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not done:
            _remove_empty(made)
    return names


def _remove_empty(folders: Sequence[Path]) -> None:
    """Remove ``folders`` (deepest first) that this run made, as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            break


def _move(tmp: Path, out: Path, names: Sequence[str], *, force: bool) -> None:
    """Move ``names`` from ``tmp`` into ``out``: over an existing regular file only with ``force``; without it,
    a file that appeared meanwhile is never replaced, and the files moved so far are taken back."""
    from ..base.outfile import check_target, os_reason

    moved: list[Path] = []
    try:
        for name in names:
            src, dst = tmp / name, out / name
            check_target(dst, force=force)
            if force:
                os.replace(src, dst)
                continue
            try:
                os.link(src, dst)  # fails on an existing name: never replaces one
            except FileExistsError:
                raise TutorError(t("new.exists", path=dst)) from None
            except OSError:  # a file system without hard links
                if os.path.lexists(dst):
                    raise TutorError(t("new.exists", path=dst)) from None
                os.rename(src, dst)
            moved.append(dst)
    except OSError as err:
        for path in moved:
            path.unlink(missing_ok=True)
        raise TutorError(t("new.unwritable", path=out, reason=os_reason(err))) from None
    except TutorError:
        for path in moved:
            path.unlink(missing_ok=True)
        raise
