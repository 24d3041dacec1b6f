"""For instructors: validating exercise files and packs, writing new exercises, handout files, pack listings.

The library below ``attn-tutor validate``, ``new``, ``list`` and ``explain
--export``; the commands in :mod:`tutor.cli.author` and
:mod:`tutor.cli.explain` only parse options, call these and print.  Nothing
here prints: results are returned as data (:class:`ValidationReport`), text,
or :class:`tutor.base.errors.TutorError` with a finished sentence.  Nothing at
module level imports sympy or numpy (``attn-tutor list`` uses
:func:`catalog_rows`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import Problem, TutorError
from ..base.messages import t
from ..base.textsafe import shown

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..exercise import Exercise, Validation
    from ..exercise.catalog import Catalog
    from ..steps import Solution


# --- validate ------------------------------------------------------------------------


def _targets(paths: list[Path]) -> tuple[list[tuple[Path, bool]], list[Problem]]:
    """The files to validate: ``(file, named)``; ``named`` is False for files found in a directory."""
    from ..exercise.catalog import yaml_files

    files: list[tuple[Path, bool]] = []
    problems: list[Problem] = []
    for path in paths:
        if path.is_dir():
            found = yaml_files(path)
            if not found:
                problems.append(Problem(str(path), None, None, "", t("validate.no_files"), t("validate.no_files.hint")))
            files += [(f, False) for f in found]
        elif os.path.lexists(path):  # a FIFO, a device, a broken link, a symlink loop: reported when read
            files.append((path, True))
        else:
            problems.append(Problem(str(path), None, None, "", t("validate.missing")))
    return list(dict.fromkeys(files)), problems


def validate_paths(paths: list[Path]) -> tuple[list[Validation], list[Problem]]:
    """Validate every file named or found below ``paths``; also report ids defined twice.

    Returns one :class:`tutor.exercise.Validation` per file (solution files
    found in a directory are skipped; one named is a problem) and the problems
    that belong to no single file's content: missing paths, empty
    directories, clashing ids (with the bundled exercises too).  Raises
    nothing for a bad file: every problem is in the result.
    """
    from ..exercise import Validation
    from ..exercise.catalog import bundled_dir, read_exercise_file, real_path, yaml_files

    targets, problems = _targets(paths)
    results: list[Validation] = []
    from ..drills.bank import validation as bank_validation

    for file, named in targets:
        bank = bank_validation(file)  # a concept bank file (issue 14), checked against its own schema
        if bank is not None:
            results.append(bank)
            continue
        checked = read_exercise_file(file)
        if checked is None:  # a solution file
            if named:
                checked = Validation(str(file), (Problem(str(file), 1, 1, "exercise", t("validate.solution_file"),
                                                         t("validate.solution_file.hint", file=file)),))
            else:
                continue
        results.append(checked)
    seen: dict[str, str] = {}
    bundled = {Path(real_path(p)) for p in yaml_files(bundled_dir())}
    mine = {Path(real_path(r.file)) for r in results}  # realpath, not resolve(): a symlink loop must not raise
    for p in sorted(bundled - mine):
        checked = read_exercise_file(p, f"bundled:{p.name}")
        if checked is not None and checked.exercise is not None:
            seen.setdefault(checked.exercise.id, checked.file)
    for r in results:
        if r.exercise is None:
            continue
        first = seen.setdefault(r.exercise.id, r.file)
        if first != r.file:
            problems.append(Problem(r.file, None, None, "id", t("catalog.duplicate_id", id=r.exercise.id, first=first, second=r.file),
                                    t("catalog.duplicate_id.hint")))
    return results, problems


def problem_dict(p: Problem, severity: str) -> dict[str, Any]:
    """One problem as JSON data: ``file``, ``line``, ``column`` (``None`` without a place), ``field``,
    ``message``, ``hint``, ``severity`` (``"error"`` or ``"warning"``) and ``text`` (the line as printed).

    The shape of every error in ``validate --format json`` and in the error
    document of any ``--format json`` command.
    """
    return {"file": p.file, "line": p.line, "column": p.column, "field": p.field, "message": p.message,
            "hint": p.hint, "severity": severity, "text": shown(str(p), keep="\t")}  # as stderr shows it


def note_text(p: Problem) -> str:
    """``file: note: message (hint)``."""
    return t("validate.note.line", where=p.location(), text=p.text())


def warning_text(p: Problem) -> str:
    """``file:line:col: warning: field: message (hint)``."""
    rest = str(p)[len(p.location()) + 2:]
    return t("validate.warning.line", where=p.location(), text=rest)


@dataclass
class ValidationReport:
    """What ``validate`` found: each file's :class:`tutor.exercise.Validation`, and the problems of no
    single file's content (``extra``: missing paths, empty folders, clashing ids), filed under the file they
    name when it is one of ``results``.  ``notes``: by file, the core mistakes a valid exercise cannot
    catch (:func:`tutor.mistakes.invisible.uncaught`) -- for the instructor, neither errors nor warnings.
    """

    results: list[Validation]
    extra: list[Problem] = field(default_factory=list)
    notes: dict[str, list[tuple[str, Problem]]] = field(default_factory=dict)

    def _by_file(self) -> dict[str, list[Problem]]:
        by_file: dict[str, list[Problem]] = {}
        for p in self.extra:
            by_file.setdefault(p.file, []).append(p)
        return by_file

    @property
    def invalid(self) -> int:
        """How many files have a problem (of their own, or filed under them)."""
        by_file = self._by_file()
        return sum(1 for r in self.results if not r.ok or by_file.get(r.file))

    @property
    def problems(self) -> int:
        """How many problems were found in all."""
        return sum(len(r.problems) for r in self.results) + len(self.extra)

    @property
    def ok(self) -> bool:
        """True when at least one file was validated and nothing is wrong (warnings allowed)."""
        return self.problems == 0 and bool(self.results)

    def document(self) -> dict[str, Any]:
        """``validate --format json``: ``{"valid", "files": [{"file", "valid", "id", "problems", "warnings",
        "notes"}], "problems", "summary": {"files", "valid", "invalid", "problems", "warnings", "notes"}}``;
        a note is a problem's fields with ``severity`` ``"note"`` and ``key``, the misconception it names."""
        by_file = self._by_file()
        invalid = self.invalid
        files = [
            {"file": r.file, "valid": r.ok and not by_file.get(r.file), "id": r.exercise.id if r.exercise else None,
             "problems": [problem_dict(p, "error") for p in list(r.problems) + by_file.pop(r.file, [])],
             "warnings": [problem_dict(p, "warning") for p in r.warnings],
             "notes": [problem_dict(p, "note") | {"key": key, "text": note_text(p)} for key, p in self.notes.get(r.file, [])]}
            for r in self.results
        ]
        other = [problem_dict(p, "error") for ps in by_file.values() for p in ps]
        return {"valid": self.ok, "files": files, "problems": other,
                "summary": {"files": len(self.results), "valid": len(self.results) - invalid, "invalid": invalid,
                            "problems": self.problems, "warnings": sum(len(r.warnings) for r in self.results),
                            "notes": sum(len(n) for n in self.notes.values())}}

    def lines(self) -> list[str]:
        """The report for people, one line per problem or warning, file by file; then the problems of no file."""
        by_file = self._by_file()
        lines: list[str] = []
        for r in self.results:
            lines += [str(p) for p in r.problems]
            lines += [str(p) for p in by_file.pop(r.file, [])]
            lines += [warning_text(p) for p in r.warnings]
            lines += [note_text(p) for _, p in self.notes.get(r.file, [])]
        lines += [str(p) for ps in by_file.values() for p in ps]
        return lines

    def summary(self) -> str:
        """The one-line count of files, valid ones, invalid ones and problems."""
        invalid = self.invalid
        return t("validate.summary", files=len(self.results), valid=len(self.results) - invalid, invalid=invalid,
                 problems=self.problems)


def validate(paths: list[Path], *, notes: bool = True) -> ValidationReport:
    """Validate the files and folders ``paths`` (:func:`validate_paths`) into a :class:`ValidationReport`,
    with a note for each core mistake a valid exercise cannot catch (:func:`mistake_notes`) unless not ``notes``."""
    results, extra = validate_paths(paths)
    found = {}
    if notes:
        found = {r.file: n for r in results if r.exercise is not None and (n := mistake_notes(r.exercise, r.file))}
    return ValidationReport(results, extra, found)


def mistake_notes(ex: Exercise, file: str) -> list[tuple[str, Problem]]:
    """One note per core mistake ``ex`` cannot catch where it is made (:func:`tutor.mistakes.invisible.uncaught`):
    the misconception's key, and the sentence ``validate`` prints with a hint on how to catch it."""
    from ..mistakes.invisible import VALIDATED, invisible, reason, uncaught
    from ..steps import solve

    sol = solve(ex)
    found = invisible(sol, VALIDATED)
    exact = {(f.key, f.step): f.exact for f in found}
    notes = []
    for key, steps in uncaught(sol, found):
        where = t("list.sep").join(t("invisible.validate.step_of_head", step=sol.step(*s).name, head=s[1] + 1)
                                   if s[1] is not None and ex.num_heads > 1 else sol.step(*s).name for s in steps)
        reasons = {reason(key, sol, s) for s in steps}  # said only when it holds at every step
        because = reasons.pop() if len(reasons) == 1 else ""
        if not because and not all(exact[key, s] for s in steps):  # the floats decided: said, as in explain's notes
            because = t("invisible.because.floats")
        message = t("invisible.validate", mistake=t(f"invisible.mistake.{key}"), steps=where, because=because)
        notes.append((key, Problem(file, None, None, "", message, t(f"invisible.hint.{key}"))))
    return notes


# --- new -----------------------------------------------------------------------------


def write_exercise(text: str, output: Path, *, force: bool = False) -> None:
    """Write an exercise's YAML ``text`` to ``output``, creating its folder.

    Raises :class:`TutorError` (exit 2) when ``output`` exists and ``force``
    is False, when it exists and is not a regular file (even with ``force``:
    a FIFO would block, a device would be written to), or when it cannot be
    written (the reason from the system): :func:`tutor.base.outfile.write_file`.
    """
    from ..base.outfile import check_target, os_reason, write_file

    check_target(output, force=force)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TutorError(t("new.unwritable", path=output, reason=os_reason(err))) from err
    write_file(output, text, force=force)


# --- handouts (explain --export) --------------------------------------------------------------

EXPORT_SUFFIXES = (".html", ".htm", ".svg", ".md", ".pdf")
#: The ``--format`` values each kind of export is: an SVG picture is the terminal output; an HTML page (and its PDF)
#: is a document of its own, which ``--format html`` prints.
EXPORT_FORMATS = {".html": ("html", "rich"), ".htm": ("html", "rich"), ".svg": ("rich",), ".md": ("markdown",),
                  ".pdf": ("html", "rich")}


def export_handout(sol: Solution, path: Path, *, head: int | None, precision: int, blank: bool,
                    brief: bool = False, force: bool = False, environ: Mapping[str, str] | None = None,
                    student: str | None = None, say: Callable[[str], None] | None = None) -> None:
    """Write ``sol`` to ``path`` as the handout its suffix names (one of :data:`EXPORT_SUFFIXES`).

    ``.md`` is Markdown, ``.svg`` the terminal output as an SVG picture,
    ``.html``/``.htm`` a standalone page, ``.pdf`` that page printed by headless
    Chromium (:func:`tutor.render.pdf.print_pdf`, found on the ``PATH`` of
    ``environ``, the run's variables; without Chromium a :class:`TutorError`
    says how to get it); ``blank`` leaves the values out (a
    worksheet).  Control characters are escaped in the file (a page is read
    with ``cat`` too).  ``brief`` leaves out the arithmetic of a hand-sized
    exercise.  ``student``: a worksheet handed to that student (``handouts``): it says how to hand in (a
    solution file with ``exercise:`` and ``student:``) instead of where the answer key is.  ``say``: told
    one line before a PDF is waited for (:func:`tutor.render.pdf.print_pdf`).
    Raises :class:`ValueError` for another suffix and
    :class:`TutorError` when the file is refused or cannot be written
    (:func:`tutor.base.outfile.write_file`: an existing file only with ``force``,
    never one that is not a regular file).
    """
    from ..render.html import export_html, export_svg
    from ..render.markdown import render_markdown

    suffix = path.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise ValueError(f"no handout is written as {suffix!r}")
    if suffix == ".md":
        text = render_markdown(sol, head=head, precision=precision, blank=blank, brief=brief, student=student)
    elif suffix == ".svg":
        text = export_svg(sol, head=head, precision=precision, blank=blank, brief=brief)
    else:
        text = export_html(sol, head=head, precision=precision, blank=blank, brief=brief, student=student)
    from ..base.outfile import write_file

    if suffix == ".pdf":  # the page, printed
        from ..base.outfile import check_target
        from ..render.pdf import print_pdf

        check_target(path, force=force)  # before Chromium takes seconds over a file that will be refused
        write_file(path, print_pdf(shown(text, keep="\n\t"), path, environ or {}, say=say), force=force)
        return
    write_file(path, shown(text, keep="\n\t"), force=force)


# --- packs (list) ----------------------------------------------------------------------------


def catalog_rows(cat: Catalog, solved: dict[str, frozenset[tuple[str, int | None]]] | None = None) -> list[dict[str, Any]]:
    """One row per exercise of the catalogue, in learning order (:func:`tutor.exercise.catalog.learning_key`),
    with where it comes from (``source``) and, given the steps ``solved`` per exercise id (from
    the progress store), ``steps`` (how many forward steps it has, by :mod:`.steplist`: ``list`` loads no
    step catalogue), ``solved`` (how many were answered right at
    least once) and ``done`` (all of them): what ``list`` shows."""
    from ..exercise.catalog import learning_key
    from .steplist import forward_keys

    rows = []
    for entry in sorted(cat.entries, key=lambda e: learning_key(e.exercise)):
        ex = entry.exercise
        own = forward_keys(ex)
        right = len(set(own) & (solved or {}).get(ex.id, frozenset()))
        rows.append({
            "id": ex.id,
            "title": ex.local_title,
            "L": ex.L,
            "L_k": ex.L_k,
            "d_model": ex.d_model,
            "heads": ex.num_heads,
            "mask": ex.mask_kind if ex.key_padding is None else (ex.mask_kind + "+padding" if ex.mask_kind != "none" else "padding"),
            "cross": ex.is_cross,
            "difficulty": ex.difficulty,
            "tags": list(ex.tags),
            "family": ex.family,
            "source": entry.source,
            "file": ex.source,
            "steps": len(own),
            "solved": right,
            "done": right == len(own),
        })
    return rows
