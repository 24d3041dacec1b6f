"""The solution-file format: a claimed worked solution for one exercise.

The contract is the "Solution files" section of ``docs/exercise-format.md``::

    exercise: single-head-3x4        # a bundled id, or a path relative to this file
    q: [[1, 1], [2, 2], [2, 2]]       # one head: per-head steps at the top level
    weights: [[0.11, 0.45, 0.45], …]

    exercise: two-head-causal-3x4
    heads:                           # several heads: one mapping per head, in order
      - weights: …
    output: …

Any subset of the steps may be given.  Entries are numbers or strings in the
answer grammar (:mod:`tutor.answers`), read from their text (``0.4500`` keeps
its four places).  A step may also be given as text: a matrix as typed in
``practice``, or pasted as PyTorch or NumPy printed it (a YAML block scalar,
``weights: |``), split by :func:`tutor.answers.matrix_texts`; its entries are
read as a list's are (``nan`` among them).  Beyond the contract (compatible additions): ``source`` and
``title`` (text, shown in the report), a ``heads`` list shorter than the
number of heads (the heads not listed are not given), and ``~`` (null) for an
entry the source did not print.  A file must give at least one step: one
that names its exercise and nothing else checks nothing, and is refused.

YAML 1.1 traps are treated as the exercise loader treats them
(:mod:`tutor.exercise.schema`, same message keys): an entry ``yes``/``no``/``on``/
``off``, ``1:20`` or ``0x10`` is refused with the hint that YAML 1.1 tools
read it otherwise, and a plain ``010`` or ``1e3`` loads with a warning
(:attr:`SolutionFile.warnings`).  An exercise file given where a solution
file belongs is named as such.

Reading never evaluates anything: the YAML is composed safely by
:func:`tutor.exercise.yamlread.parse_yaml` and every entry goes through the answer
parser.  Every problem is collected with its file, line and column and raised
together as one :class:`tutor.base.errors.ExerciseError`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..answers import Entry, claim, entry_from_value, matrix_texts
from ..answers.values import MAX_SHARED_WORK, Work, budget
from ..base.errors import AnswerError, ExerciseError, NotFoundError, Problem
from ..base.messages import Msg, Text
from ..exercise.checks import LIMITS
from ..exercise.record import Exercise
from ..exercise.schema import RADIX, SEXAGESIMAL, YAML11_BOOL  # one definition of what YAML 1.1 reads otherwise
from ..exercise.yamlread import Document, YNum, ascii_look_alike, codepoints, describe, parse_yaml, read_text, shown
from ..exercise.yamlread import Path as YPath
from ..steps import HEAD_STEPS, KINDS, LAYER_STEPS, STEP_IDS, has_backward, keys
from .tiled_part import TiledGiven, read_tiled

#: Fields a solution file may have besides the steps.
META_FIELDS = ("exercise", "title", "source", "heads", "student")
#: The longest ``student:`` a solution file may name (a name or an id, one line of a gradebook).
MAX_STUDENT = 200
#: The longest side a step can have within the exercise format's limits (:data:`tutor.exercise.LIMITS`):
#: the concatenated heads, num_heads·d_v wide (with ``w_o``, which then sets d_out); every other
#: side is L, L_k, d_k, d_v or d_out.  A matrix with a longer side is refused before its entries are read.
MAX_SIDE = max(LIMITS["L"], LIMITS["L_k"], LIMITS["d_k"], LIMITS["d_v"], LIMITS["d_out"], LIMITS["heads"] * LIMITS["d_v"])
#: The most entries a step can have: the concatenated heads, [L × num_heads·d_v].  Sides within
#: :data:`MAX_SIDE` but more entries than this (256 × 256) are refused too.
MAX_ENTRIES = max(LIMITS["L"], LIMITS["L_k"]) * MAX_SIDE


#: NaN as a solution file may hold it: YAML's ``.nan``, and ``nan`` / ``NaN`` as
#: Python, NumPy and PyTorch print it (``nn.MultiheadAttention`` does, for a
#: query that may attend to no key).
_NAN_TEXT = re.compile(r"[+-]?\.?nan", re.IGNORECASE)


@dataclass(frozen=True)
class NanEntry:
    """An entry written as NaN (``nan``, ``.nan``): not a number, so wrong wherever it stands.

    It is read here, before the answer parser (which refuses NaN in a typed
    answer), so that a pasted PyTorch result gets a report rather than an
    unusable file.  Same fields as :class:`tutor.answers.Entry` where the
    auditor reads them: ``text``, ``is_exact`` (False), ``places`` (None),
    :meth:`value` (NaN).
    """

    text: str
    is_exact: bool = False
    places: int | None = None

    def value(self) -> float:
        return math.nan


def nan_entry(value: Any) -> NanEntry | None:
    """The :class:`NanEntry` for a YAML value that is NaN (``.nan``, ``nan``, ``NaN``, a float NaN), else ``None``."""
    if isinstance(value, float) and math.isnan(value):
        return NanEntry("nan")
    if isinstance(value, str) and _NAN_TEXT.fullmatch(value.strip()):
        return NanEntry(value.strip())
    return None


@dataclass(frozen=True)
class GivenStep:
    """One step as the file gives it.

    ``entries`` is ``[rows][cols]``; ``None`` marks an entry not given (``~``),
    a :class:`NanEntry` one written as NaN.
    ``field`` is the step's path in the file (``heads[1].weights``); ``line``
    and ``column`` (1-based) where its value starts.
    """

    id: str
    head: int | None
    entries: tuple[tuple[Entry | NanEntry | None, ...], ...]
    field: str
    line: int | None
    column: int | None

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.entries), len(self.entries[0]))

    def bounds(self, *, nan_as_missing: bool = False, tolerance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` float64 ``[rows, cols]``: the values each entry claims, by the one grading
        rule (:func:`tutor.answers.claim`).

        A decimal written to ``p`` places claims ``± 0.5·10^-p`` (``± tolerance``
        with ``tolerance``); an exact entry (integer, fraction, ``sqrt(2)/2``,
        ``-inf``) claims itself; an expression containing decimals (``1.41/2``)
        claims its value ± half a unit in the last place of its least precise
        decimal; an entry not given has ``NaN`` bounds.  An entry written as NaN
        claims no value at all: the empty interval ``(+inf, -inf)``, which
        no value lies in (with ``nan_as_missing``: ``NaN`` bounds, as if not
        given, for the checks that look only at the numbers written).
        """
        r, c = self.shape
        lo = np.full((r, c), np.nan)  # [r, c]
        hi = np.full((r, c), np.nan)  # [r, c]
        for i, row in enumerate(self.entries):
            for j, e in enumerate(row):
                if e is None:
                    continue
                if isinstance(e, NanEntry):
                    if not nan_as_missing:
                        lo[i, j], hi[i, j] = math.inf, -math.inf
                    continue
                lo[i, j], hi[i, j] = claim(e, tolerance=tolerance)
        return lo, hi

    def nan_cells(self) -> np.ndarray:
        """``[rows, cols]`` bool: True where the entry is written as NaN."""
        return np.array([[isinstance(e, NanEntry) for e in row] for row in self.entries], dtype=bool)

    def texts(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple("~" if e is None else e.text for e in row) for row in self.entries)

    def values(self) -> np.ndarray:
        """The written values as float64 ``[rows, cols]`` (``NaN`` where not given or written as NaN)."""
        return np.array([[math.nan if e is None else e.value() for e in row] for row in self.entries], dtype=np.float64)


@dataclass(frozen=True)
class SolutionFile:
    """A parsed solution file: its exercise and the steps it gives, in the contract's order.

    ``warnings`` are problems that do not stop the file from loading (a
    plain ``010``, read as ten where YAML 1.1 tools read eight).
    """

    file: str
    exercise: Exercise
    steps: tuple[GivenStep, ...]
    title: str = ""
    source: str = ""
    warnings: tuple[Problem, ...] = ()
    tiled: TiledGiven | None = None  # a worked online softmax (issue 13), judged by tutor.flash.check
    student: str = ""  # who wrote it (issue 24: batch check's student column), "" when not said

    def given(self, id: str, head: int | None) -> GivenStep | None:
        for s in self.steps:
            if s.id == id and s.head == head:
                return s
        return None


class Reader:
    """Reads a solution file's parts from its YAML document, collecting every problem at its place."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.problems: list[Problem] = []

    def add(self, path: YPath, message: Text, hint: Text = "", *, key: bool = False) -> None:
        self.problems.append(self.doc.problem(path, message, hint, key=key))

    def too_large(self, path: YPath, value: list[Any]) -> bool:
        """True, with one problem for the whole matrix, when it is larger than any step within the
        format's limits (:data:`MAX_SIDE`, :data:`MAX_ENTRIES`); none of its entries is read."""
        lengths = [len(row) for row in value if isinstance(row, list)]
        widest = max(lengths, default=0)
        if len(value) > MAX_SIDE or widest > MAX_SIDE:
            at = path if len(value) > MAX_SIDE else path + (next(r for r, row in enumerate(value)
                                                                 if isinstance(row, list) and len(row) == widest),)
            self.add(at, Msg("solution.too_large", rows=len(value), cols=widest, limit=MAX_SIDE))
            return True
        if sum(lengths) > MAX_ENTRIES:
            self.add(path, Msg("solution.too_many_entries", found=sum(lengths), limit=MAX_ENTRIES))
            return True
        return False

    def matrix(self, path: YPath, value: Any) -> tuple[tuple[Entry | NanEntry | None, ...], ...] | None:
        if isinstance(value, str) and not isinstance(value, YNum):  # a matrix as typed, or as PyTorch or NumPy printed it
            try:
                value = matrix_texts(value)
            except AnswerError as err:
                self.add(path, str(err))
                return None
        if not isinstance(value, list) or not value:
            self.add(path, Msg("schema.expected", expected=Msg("expected.matrix"), found=describe(value)))
            return None
        if self.too_large(path, value):
            return None
        rows: list[tuple[Entry | NanEntry | None, ...]] = []
        ok = True
        for r, row in enumerate(value):
            if not isinstance(row, list) or not row:
                self.add(path + (r,), Msg("schema.expected", expected=Msg("expected.row"), found=describe(row)))
                ok = False
                continue
            entries: list[Entry | NanEntry | None] = []
            for c, v in enumerate(row):
                if v is None:
                    entries.append(None)
                    continue
                if (nan := nan_entry(v)) is not None:  # before the answer parser, which refuses NaN
                    entries.append(nan)
                    continue
                try:
                    entries.append(entry_from_value(v))
                except AnswerError as err:
                    hint = _yaml11_hint(v)
                    if hint:  # worded as the exercise loader words it
                        self.add(path + (r, c), Msg("schema.expected", expected=Msg("expected.number"), found=describe(v)), hint)
                    else:
                        self.add(path + (r, c), str(err))
                    ok = False
            rows.append(tuple(entries))
        if not ok:
            return None
        for r, row in enumerate(rows[1:], start=1):
            if len(row) != len(rows[0]):
                self.add(path + (r,), Msg("shape.ragged", row=r + 1, found=len(row), expected=len(rows[0])))
                return None
        if all(e is None for row in rows for e in row):
            self.add(path, Msg("solution.all_missing"))
            return None
        return tuple(rows)


def _yaml11_hint(value: Any) -> Text:
    """The exercise loader's hint for an entry YAML 1.1 tools read as something else, or ``""``."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    if text.lower() in YAML11_BOOL:
        return Msg("hint.yaml11_bool", text=text)
    if SEXAGESIMAL.fullmatch(text):
        return Msg("hint.base60.text", text=text)
    if RADIX.fullmatch(text):
        return Msg("hint.radix")
    return ""


#: Fields only an exercise file has (``title`` and ``heads`` are shared with solution files).
_EXERCISE_FIELDS = ("id", "x", "x_kv", "num_heads", "w_q", "w_k", "w_v", "w_o", "mask", "key_padding",
                    "key_padding_mask")


def _exercise_fields(data: dict[str, Any]) -> list[str]:
    """The exercise-only fields of a file without ``exercise:``: non-empty means it is an exercise file."""
    if "exercise" in data:
        return []
    found = [k for k in _EXERCISE_FIELDS if k in data]
    heads = data.get("heads")
    if isinstance(heads, list) and any(isinstance(h, dict) and {"w_q", "w_k", "w_v"} & set(h) for h in heads):
        found.append("heads[].w_q")
    return found


def _suggest(name: str, steps: list[str], fields: Sequence[str] = (), ex: Exercise | None = None) -> Text:
    """The hint for an unknown key: the step or field it looks like, else the step names (and the other
    fields a solution file may have, named apart: they are not steps).  With ``ex``, the steps named are
    those of ``ex``, its backward pass's as their first and last, not every step of the format (41 names
    are much for a student)."""
    looks = ascii_look_alike(name)  # a Cyrillic 'с' in 'sсores', a zero-width space: what it was meant to be
    choices = steps + list(fields)
    close = [looks] if looks in choices else difflib.get_close_matches(looks, choices, n=1, cutoff=0.6)
    if close:
        return Msg("schema.unknown.hint", suggestion=close[0])
    if ex is not None:
        return _exercise_steps_hint(ex, fields)
    if fields:
        return Msg("solution.unknown.hint.fields", steps=", ".join(steps), fields=", ".join(fields))
    return Msg("solution.unknown.hint", steps=", ".join(steps))


def _exercise_steps_hint(ex: Exercise, fields: Sequence[str]) -> Msg:
    """The steps ``ex`` has, and its backward pass's first and last when it has one (not with ``mla``), as the
    hint of an unknown key says them; ``fields``: the other fields a solution file may have."""
    forward = list(dict.fromkeys(i for i, _ in keys(ex)))
    back = [i for i in dict.fromkeys(i for i, _ in keys(ex, backward=True)) if i not in forward] if ex.mla is None else []
    key = "solution.unknown.hint.exercise" + (".backward" if back else "") + (".fields" if fields else "")
    return Msg(key, steps=Msg.joined("list.sep", forward), first=back[0] if back else "",
               last=back[-1] if back else "", fields=Msg.joined("list.sep", list(fields)))


def _kind(value: Any) -> Text:
    """What a YAML value is, without any of its content: text, a list, a single value (a number ...)."""
    from ..exercise.yamlread import YNum

    if isinstance(value, (YNum, bool, int, float)):
        return Msg("kind.scalar")
    if isinstance(value, str):
        return Msg("kind.text")
    if isinstance(value, (list, tuple)):
        return Msg("found.list")
    if value is None:
        return Msg("kind.null")
    return Msg("kind.scalar")


def _unknown(name: str) -> Text:
    """'x' is not a step name; with the code points of any invisible or look-alike character in it."""
    names = codepoints(name)
    return Msg("solution.unknown.codepoints", name=shown(name), names=names) if names else Msg("solution.unknown", name=name)


def _resolve_exercise(name: str, base: Path, r: Reader, path: YPath, folders: Sequence[str | Path],
                      shown_base: str) -> Exercise | None:
    """The exercise ``exercise:`` names (:func:`tutor.exercise.catalog.resolve_reference`: only exercise files
    below ``base``, in a pack or bundled are read); a problem at ``path`` when it names none.  ``shown_base``
    is ``base`` as the solution file was named (``check``'s reports go back to students: never the
    grader's absolute folder)."""
    from ..exercise.catalog import RefusedReference, resolve_reference

    try:
        return resolve_reference(name, base, folders, shown_base=shown_base)
    except RefusedReference as err:
        r.add(path, err.message, err.hint)
    except NotFoundError as err:  # an id defined twice, naming both files
        r.add(path, str(err))
    return None


def read_solution(text: str, filename: str, *, base: Path | None = None, exercise: Exercise | None = None,
                  folders: Sequence[str | Path] = ()) -> SolutionFile:
    """Parse solution-file text.

    ``base`` is the folder a relative ``exercise:`` path is taken from (the
    solution file's own folder); only exercise files in it or below, in a
    pack (``folders``: ``--exercises``, then ``ATTN_TUTOR_PATH``) or bundled are read, and an id is
    looked up among the bundled exercises and the packs.  ``exercise``, when
    given, overrides the file's ``exercise:`` (the ``--exercise`` option).
    Raises :class:`ExerciseError` listing every problem (file:line:col); a
    problem with the exercise named never quotes that file's content.  All the
    entries of the file share one work budget (:data:`tutor.answers.values.MAX_SHARED_WORK`,
    about 3 s), besides each entry's own: past it an entry that needs more
    than reading is refused as too large to check exactly.
    """
    with budget(Work(MAX_SHARED_WORK, "answer.too_costly_total")):  # every entry of the file together
        return _read_solution(text, filename, base=base, exercise=exercise, folders=folders)


def _read_solution(text: str, filename: str, *, base: Path | None, exercise: Exercise | None,
                   folders: Sequence[str | Path]) -> SolutionFile:
    doc = parse_yaml(text, filename)
    if doc.problems:
        raise ExerciseError([replace(p, hint=Msg("solution.empty.hint")) if p.message == Msg("yaml.empty") else p
                             for p in doc.problems])
    if not isinstance(doc.value, dict):  # named by its kind only: the text of a file that is not a solution is never shown
        raise ExerciseError([doc.problem((), Msg("solution.not_solution", what=Msg("solution.not_solution.top",
                                                                                kind=_kind(doc.value))),
                                         Msg("solution.empty.hint"))])
    data: dict[str, Any] = doc.value
    if fields := _exercise_fields(data):
        raise ExerciseError([doc.problem((), Msg("solution.is_exercise", fields=", ".join(fields)),
                                         Msg("solution.is_exercise.hint", file=filename))])
    if "exercise" not in data and not any(k in HEAD_STEPS or k in LAYER_STEPS or k == "heads" for k in data):
        # no sign of a solution file (a configuration file, say): none of its keys or values is quoted
        raise ExerciseError([doc.problem((), Msg("solution.not_solution", what=Msg("solution.not_solution.keys")),
                                         Msg("solution.empty.hint"))])
    r = Reader(doc)

    if exercise is None:
        name = data.get("exercise")
        if name is None:
            r.add((), Msg("solution.no_exercise"), Msg("solution.no_exercise.hint"))
        elif not isinstance(name, str) or not name.strip():
            r.add(("exercise",), Msg("schema.expected", expected=Msg("expected.text"), found=describe(name)))
        else:
            exercise = _resolve_exercise(name.strip(), base or Path(os.path.abspath(".")), r, ("exercise",), folders,
                                         os.path.dirname(filename))
    for meta in ("title", "source"):
        if meta in data and not isinstance(data[meta], str):
            r.add((meta,), Msg("schema.expected", expected=Msg("expected.text"), found=describe(data[meta])))
    student = _student(r, data)
    if exercise is None:
        raise ExerciseError(r.problems)

    ex = exercise
    names = list(STEP_IDS)  # the contract's order: the forward pass, then the backward pass
    found: dict[tuple[str, int | None], GivenStep] = {}

    def take(path: YPath, id: str, head: int | None, value: Any) -> None:
        if id == "x_norm" and ex.post_norm:  # the shared format's name of post-norm's last step, out_norm here
            id = "out_norm"
        if not KINDS[id].exists(ex):
            r.add(path, Msg(f"solution.no_step.{id}"), key=True)
            return
        m = r.matrix(path, value)
        if m is not None:
            line, col = doc.where(path)
            found[id, head] = GivenStep(id, head, m, _field(path), line, col)

    top_head_steps = [k for k in data if k in HEAD_STEPS]
    if top_head_steps and ex.num_heads > 1:
        for k in top_head_steps:
            r.add((k,), Msg("solution.needs_heads", step=k, heads=ex.num_heads), Msg("solution.needs_heads.hint", step=k), key=True)
    if top_head_steps and "heads" in data:
        r.add(("heads",), Msg("solution.both_forms"), key=True)
    tiled_given = None
    for key, value in data.items():
        if key in META_FIELDS:
            continue
        if key == "tiled":  # a worked online softmax, judged by tutor.flash.check (issue 13)
            tiled_given = read_tiled(r, value, ex)
            continue
        if key in LAYER_STEPS:
            take((key,), key, None, value)
        elif key in HEAD_STEPS:
            if ex.num_heads == 1 and "heads" not in data:
                take((key,), key, 0, value)
        else:
            r.add((key,), _unknown(key), _suggest(key, names, (*META_FIELDS, "tiled"), ex), key=True)

    heads = data.get("heads")
    if heads is not None:
        if not isinstance(heads, list):
            r.add(("heads",), Msg("schema.expected", expected=Msg("expected.list"), found=describe(heads)))
        else:
            if len(heads) > ex.num_heads:
                r.add(("heads",), Msg("solution.too_many_heads", found=len(heads), heads=ex.num_heads))
            for h, block in enumerate(heads[: ex.num_heads]):
                p: YPath = ("heads", h)
                if block is None:
                    continue
                if not isinstance(block, dict):
                    r.add(p, Msg("schema.expected", expected=Msg("expected.mapping"), found=describe(block)))
                    continue
                for key, value in block.items():
                    if key in HEAD_STEPS:
                        take(p + (key,), key, h, value)
                    elif key in LAYER_STEPS:
                        r.add(p + (key,), Msg("solution.layer_in_head", step=key), key=True)
                    else:
                        r.add(p + (key,), _unknown(key), _suggest(key, list(HEAD_STEPS), ex=ex), key=True)

    if not found and not r.problems and "tiled" not in data:
        r.add((), Msg("solution.no_steps"), Msg("solution.empty.hint"))
    if r.problems:
        raise ExerciseError(r.problems)
    # in the contract's order, the backward steps too when some are given (issue 13; refused, in one
    # line, for an exercise the backward pass is not built for)
    steps = tuple(found[k] for k in keys(ex, backward=has_backward(k[0] for k in found)) if k in found)
    return SolutionFile(filename, ex, steps, str(data.get("title") or ""), str(data.get("source") or ""),
                        tuple(doc.warnings), tiled=tiled_given, student=student)


def _student(r: Reader, data: dict[str, Any]) -> str:
    """The file's ``student:`` (issue 24): text or a number as written (an id such as ``20231234``), at most
    :data:`MAX_STUDENT` characters, ``""`` when absent; a problem at the field otherwise."""
    if "student" not in data or data["student"] is None:
        return ""
    value = data["student"]
    if not isinstance(value, str):  # a number is a YNum, a str holding its text
        r.add(("student",), Msg("schema.expected", expected=Msg("expected.text"), found=describe(value)))
        return ""
    if len(value) > MAX_STUDENT:
        r.add(("student",), Msg("solution.student_long", found=len(value), limit=MAX_STUDENT))
        return ""
    return value.strip()


def _field(path: YPath) -> str:
    from ..exercise.yamlread import format_path

    return format_path(path)


def _check_inside(path: str) -> None:
    """Refuse a solution path that leads, through a symbolic link, outside the folder it is named in.

    The rule ``exercise:`` follows (:func:`tutor.exercise.catalog.resolve_reference`), for the file named on
    the command line: an autograder runs ``check`` on a student's submission and hands the report
    back, and a submission ``hw.yaml -> /etc/hostname`` would have its target quoted.  The real
    path (every link followed) must lie in the real folder of the path as given.  Nothing is read.
    """
    folder = Path(os.path.abspath(path)).parent
    try:
        target = Path(os.path.realpath(path))
        inside = target == Path(os.path.realpath(folder)) or Path(os.path.realpath(folder)) in target.parents
    except (OSError, ValueError):  # a NUL character, a name too long: read_text says what
        return
    if not inside:
        raise ExerciseError([Problem(str(path), None, None, "", Msg("solution.outside"),
                                     Msg("solution.outside.hint"))])


def load_solution(path: str, *, exercise: str | None = None, folders: Sequence[str | Path] = ()) -> SolutionFile:
    """Read the solution file at ``path``; ``exercise`` (an id or a path, taken
    from the current folder: named on the command line, so read as ``explain``
    reads it) overrides the file's ``exercise:``; ``folders`` are packs
    (``--exercises``, then ``ATTN_TUTOR_PATH``) searched for ids and allowed for paths.

    Raises :class:`ExerciseError` (unreadable, not YAML, bad steps or
    entries, with file:line:col) or :class:`NotFoundError` (no such exercise).
    Like the files ``exercise:`` names, ``path`` is read only if it is a
    regular file inside the folder it is named in (a symbolic link out of it is
    refused unread), and a file that is not a solution file (its top level not
    a mapping; no ``exercise:`` and no step) is refused without quoting it.
    """
    _check_inside(path)
    text, problems = read_text(path)
    if text is None:
        raise ExerciseError(problems)
    override = None
    if exercise is not None:
        from ..exercise.catalog import resolve

        override = resolve(exercise, folders)
    # the folder as named (not through a symbolic link to the file): the tree the solution is in
    base = Path(os.path.abspath(path)).parent
    return read_solution(text, str(path), base=base, exercise=override, folders=folders)
