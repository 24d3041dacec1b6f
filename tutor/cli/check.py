"""`check`: the errata auditor for written solutions (issue 4), and a class's submissions graded in one run (issue 24).

One file named (not a folder) is checked as it always was: its report in words
or, with ``--format json``, the report's document.  Several files, or a folder
(its ``*.yaml``/``*.yml`` files, sorted), are graded into one row each
(:mod:`tutor.audit.batch`): a table, the gradebook CSV (``--format csv``) or
the document ``{"submissions": [...], "summary": {...}, "warnings": [...]}``; an unusable file is a
row, and so is a file attn-tutor itself fails on (unusable, its comment saying the failure is
attn-tutor's: one bug costs one row, not the run); the run's exit code is the worst of its files' (2 over
1 over 0).  What the run passes over (a folder's other entries, a file named twice, the exercise file beside
the submissions, a roster index it cannot read) is a warning line on stderr, or in the document's
``warnings``.
``report`` reads such rows (a folder graded now, or the CSV read back) and
the class's ``stats --export`` files into the class view (:mod:`tutor.audit.classview`,
:mod:`tutor.store.export`); it exits 0, or 2 on a source it cannot read.

Exit codes: 0 every given step right and plausible; 1 something is wrong
(raised as :class:`tutor.cli.common.SolutionWrong`, the only way to exit
code 1); 2 the file is unusable (raised as a :class:`tutor.base.errors.TutorError`,
which :func:`tutor.cli.main` prints as ``error: file:line:col: ...``, and
with ``--format json`` also as the error document on stdout); 3 attn-tutor
itself failed.  The file's warnings (a plain ``010``) do not change the exit
code: they are ``file:line:col: warning: ...`` lines on stderr, or the
``warnings`` of the JSON report.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..base.ascii import asciify, is_utf
from ..base.messages import t
from ..base.textsafe import shown
from .common import (
    EXIT_INPUT,
    EXIT_WRONG,
    ExercisesOpt,
    Format,
    SolutionWrong,
    console,
    environment,
    folders,
    warn,
    write_document,
    write_json,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..audit.batch import Copy, Grader
    from ..audit.solution import SolutionFile
    from ..base.env import Env
    from ..base.errors import Problem


#: ``check``'s and ``report``'s ``--exercise`` (the exercise every file is graded against) and ``--tolerance``.
ExerciseNamedOpt = Annotated[str | None, typer.Option("--exercise", help=t("cli.check.exercise"))]
CheckToleranceOpt = Annotated[float | None, typer.Option("--tolerance", help=t("cli.check.tolerance"), show_default=False)]


class CheckFormat(str, Enum):
    """``--format`` of check: for people, JSON for scripts, or the gradebook CSV (issue 24)."""

    rich = "rich"
    json = "json"
    csv = "csv"
    excel_csv = "excel-csv"  # the same CSV after a byte order mark: Excel on Chinese Windows reads it as UTF-8


def check(
    ctx: typer.Context,
    solution: Annotated[list[str], typer.Argument(help=t("cli.check.solution"))],
    exercise: ExerciseNamedOpt = None,
    tolerance: CheckToleranceOpt = None,
    fmt: Annotated[CheckFormat, typer.Option("--format", help=t("cli.check.format"))] = CheckFormat.rich,
    exercises: ExercisesOpt = None,
) -> None:
    """Audit a solution file against its exercise; raise :class:`SolutionWrong` when it is wrong.
    Several files or a folder: grade each into a row (:func:`check_batch`)."""
    from .practice import check_tolerance

    check_tolerance(tolerance)
    env = environment(ctx)
    if len(solution) == 1 and not os.path.isdir(solution[0]) and fmt not in (CheckFormat.csv, CheckFormat.excel_csv):
        _check_one(env, solution[0], exercise, tolerance, Format(fmt.value), exercises)
    else:
        check_batch(env, solution, exercise, tolerance, fmt, exercises)


def _grader(env: Env, exercise: str | None, exercises: list[Path] | None, tolerance: float | None) -> Grader:
    """The one grader of batch ``check`` and ``report``: the exercise or folders a submission is found in, the
    tolerance, the online softmax's audit, and the roster's rule for telling students apart (``a b`` is ``A B``)."""
    from ..audit.batch import Grader
    from ..authoring.variants import student_slug
    from ..flash.check import audit_tiled

    return Grader(exercise=exercise, folders=folders(env, exercises), tolerance=tolerance,
                  judge_tiled=lambda ex, given, tol: audit_tiled(ex, given, tolerance=tol), student_key=student_slug)


def check_batch(env: Env, named: list[str], exercise: str | None, tolerance: float | None, fmt: CheckFormat,
                exercises: list[Path] | None) -> None:
    """Grade every solution file ``named`` (files, folders) into one row each and show the rows as ``fmt``
    says; exit 2 when a file is unusable (or attn-tutor failed on it: its row says so, the others are graded),
    else 1 when one is wrong (:class:`SolutionWrong`), else 0."""
    from ..audit.batch import beside, duplicates, exit_code, gather, not_read_line
    from ..authoring.validate import warning_text
    from ..base.errors import Problem, TutorError
    from ..base.messages import Msg, join_and

    gathered = gather(named)
    said = [Problem(folder, None, None, "", not_read_line(names)) for folder, names in gathered.not_read] + \
        [Problem(path, None, None, "", Msg("batch.repeated")) for path in gathered.repeated]
    if not gathered.paths:
        for p in said:  # what the folders hold instead (an LMS's folder per student), before the error
            warn(warning_text(p))
        raise TutorError(t("batch.no_files", where=", ".join(shown(n) for n in named)))
    grader = _grader(env, exercise, exercises, tolerance)
    rows, kept_beside = beside([grader.grade(p) for p in gathered.paths])
    if env.debug:  # a file attn-tutor failed on is a row; its traceback, as main prints one for the run's own
        import sys
        import traceback

        for row in rows:
            if row.failure is not None:
                traceback.print_exception(row.failure, file=env.stderr or sys.stderr)
    said += [Problem(path, None, None, "", Msg("batch.exercise_beside", id=found)) for path, found in kept_beside]
    # an index that cannot be read, entries not read, a file named twice: said in every format, never silent
    unread = [*grader.roster.problems, *said]
    if fmt is CheckFormat.json:
        from ..render.batch import batch_document

        write_json(batch_document(rows, unread))
    elif fmt in (CheckFormat.csv, CheckFormat.excel_csv):
        from ..render.batch import csv_text

        for p in unread:
            warn(warning_text(p))
        write_document(csv_text(rows), bom=fmt is CheckFormat.excel_csv)
    else:
        from ..render.batch import render_batch

        for p in unread:
            warn(warning_text(p))
        for row in rows:  # as check FILE says them: on stderr, changing no verdict
            for p in row.warnings:
                warn(warning_text(p))
        for student, files in duplicates(rows):  # each file is still a row: the teacher decides which counts
            warn(t("batch.duplicate", student=shown(student), files=join_and([shown(f) for f in files])))
        render_batch(rows, console(env))
    code = exit_code(rows)
    if code == EXIT_INPUT:
        raise typer.Exit(EXIT_INPUT)
    if code == EXIT_WRONG:
        raise SolutionWrong()  # exit code 1, the one way to it


def _check_one(env: Env, solution: str, exercise: str | None, tolerance: float | None, fmt: Format,
               exercises: list[Path] | None) -> None:
    """``check FILE``: the report of one solution file, as it always was."""
    from ..audit.batch import judge_copy, roster_index, student_of
    from ..audit.check import audit
    from ..audit.solution import load_solution
    from ..authoring.validate import warning_text
    from ..authoring.variants import student_slug

    found = folders(env, exercises)
    sf = load_solution(solution, exercise=exercise, folders=found)
    roster = roster_index(found, student_slug)
    copied = judge_copy(student_of(solution, sf), sf.exercise.id, roster)  # a variant that is not the student's
    if sf.tiled is not None:  # a worked online softmax (issue 13): judged on its own, after any steps
        _check_tiled(env, sf, tolerance, fmt, copied, roster.problems)
        return
    report = audit(sf, tolerance=tolerance)
    if fmt is Format.json:
        from ..render.check import dumps

        if copied is None and not roster.problems:
            write_document(dumps(report))
        else:
            import json

            doc = _with_roster(json.loads(dumps(report)), copied, roster.problems)
            if copied is not None:
                doc["verdict"], doc["exit_code"] = "wrong", EXIT_WRONG
            write_json(doc)
    else:
        from ..render.check import render

        for p in (*roster.problems, *report.solution.warnings):
            warn(warning_text(p))
        render(report, console(env))
        if copied is not None:
            _say_copy(env, copied)
    if report.exit_code == EXIT_WRONG or copied is not None:
        raise SolutionWrong()  # exit code 1, the one way to it


def _with_roster(doc: dict, copied: Copy | None, unread: Sequence[Problem]) -> dict:
    """``check FILE --format json``'s document with what a roster index says: the indexes that could not be read
    (``warnings``), and a variant that is not the student's (``roster``; ``variant_of`` when its owner is known)."""
    from ..render.batch import problem_dict

    doc["warnings"] = doc.get("warnings", []) + [problem_dict(p) for p in unread]
    if copied is not None:
        message = str(copied.comment())
        doc["roster"] = {**copied.as_dict(), "message": message}
        if copied.owner is not None:
            doc["variant_of"] = {"student": copied.owner, "own": copied.own, "message": message}
    return doc


def _say_copy(env: Env, copied: Copy) -> None:
    """``check FILE``'s last line when a roster index makes the file wrong, in bold red; the roster's ids and
    the student are text from files: shown escaped."""
    out = console(env)
    text = shown(str(copied.verdict_line()))
    out.print(text if is_utf(out.encoding) else asciify(text), style="bold red", overflow="fold", markup=False)


def _check_tiled(env: Env, sf: SolutionFile, tolerance: float | None, fmt: Format, copied: Copy | None = None,
                 unread: Sequence[Problem] = ()) -> None:
    """``check`` of a file with a ``tiled:`` part (and maybe steps): both reports, under the heading that
    names the file, its exercise, and its ``title:`` and ``source:`` (in JSON too, with its warnings, as
    for steps alone), on a console of ``env``; exit 1 when either is wrong, or when a roster index makes the
    file wrong (``copied``: :func:`tutor.audit.batch.judge_copy`).  ``unread``: the roster indexes that could
    not be read, warnings."""
    import json

    from ..audit.check import audit
    from ..authoring.validate import warning_text
    from ..flash.check import audit_tiled, tiled_json, tiled_lines

    assert sf.tiled is not None  # called only for a file with a tiled: part
    rep = audit_tiled(sf.exercise, sf.tiled, tolerance=tolerance)
    report = audit(sf, tolerance=tolerance) if sf.steps else None
    wrong = not rep.ok or (report is not None and report.exit_code == EXIT_WRONG) or copied is not None
    if fmt is Format.json:
        from ..render.check import dumps, file_dict, warnings_list

        doc = json.loads(dumps(report)) if report is not None else {**file_dict(sf), "warnings": warnings_list(sf)}
        doc = _with_roster(doc, copied, unread)
        doc["tiled"] = tiled_json(sf.exercise, rep)
        doc["verdict"], doc["exit_code"] = ("wrong", EXIT_WRONG) if wrong else ("correct", 0)
        write_json(doc)
    else:
        from rich.padding import Padding
        from rich.text import Text

        from ..render.check import render, render_heading

        for p in (*unread, *sf.warnings):
            warn(warning_text(p))
        if report is not None:
            render(report, console(env))
        else:
            render_heading(sf, console(env))
        out = console(env)
        for line in tiled_lines(sf.exercise, rep):
            text = line if is_utf(out.encoding) else asciify(line)
            indent = len(text) - len(text.lstrip(" "))
            out.print(Padding(Text(text.lstrip(" "), overflow="fold"), (0, 0, 0, indent), expand=False))
        if copied is not None:
            _say_copy(env, copied)
    if wrong:
        raise SolutionWrong()


class ReportFormat(str, Enum):
    """``--format`` of report: for people, as Markdown, or JSON for scripts."""

    rich = "rich"
    markdown = "markdown"
    json = "json"


def report(
    ctx: typer.Context,
    paths: Annotated[list[str], typer.Argument(help=t("cli.report.sources"))],
    exercise: ExerciseNamedOpt = None,
    tolerance: CheckToleranceOpt = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", help=t("cli.report.format"))] = ReportFormat.rich,
    exercises: ExercisesOpt = None,
) -> None:
    """The class view (issue 24): solution files graded (a folder's ``*.yaml``/``*.yml``, or the CSV of ``check
    --format csv``) and the class's progress files (a folder's ``*.json`` written by ``stats --export``)."""
    import json

    from ..audit.batch import SUFFIXES, Row
    from ..audit.classview import class_report, rows_from_csv
    from ..base.errors import TutorError
    from ..exercise.yamlread import read_text
    from ..store.export import checked, class_progress
    from .practice import check_tolerance

    check_tolerance(tolerance)
    env = environment(ctx)
    solutions: list[str] = []
    progress: list[tuple[str, dict]] = []
    rows: list[Row] = []
    unread: list[str] = []  # a source that cannot be read: a line of the report, never the end of it
    passed_over: list[str] = []  # what a folder holds that report does not read (x.txt, a subfolder)
    same: list[tuple[str, str]] = []  # a progress file whose content (as JSON) is another one's: counted once
    seen: dict[str, str] = {}
    read = (*SUFFIXES, ".json", ".csv")  # solution files as batch check reads them (*.yaml.txt too), progress, gradebooks

    def text_of(path: str, csv: bool = False) -> str:
        text, problems = read_text(path, shown(path))
        if text is None:
            if csv and any(str(p.hint) == t("file.not_utf8.hint") for p in problems):  # Excel's plain CSV: GBK
                raise TutorError(t("report.csv.not_utf8", file=shown(path)))
            raise TutorError("\n".join(str(p) for p in problems))
        return text

    for source in paths:
        if not os.path.isdir(source):
            named = [source]
        else:
            named = []
            for e in sorted(os.listdir(source)):
                if e.startswith("."):
                    continue
                path = os.path.join(source, e)
                if e.lower().endswith(read):  # a folder x.yaml: a row saying so
                    named.append(path)
                else:
                    passed_over.append(shown(e) + ("/" if os.path.isdir(path) else ""))
        for path in named:
            suffix = Path(path).suffix.lower()
            try:
                if suffix == ".csv":
                    rows += rows_from_csv(text_of(path, csv=True), shown(path), unread)  # a bad row: a line of unread
                elif suffix == ".json":
                    try:
                        doc = json.loads(text_of(path))
                    except (ValueError, RecursionError):
                        raise TutorError(t("progress.not_json", file=shown(path))) from None
                    doc = checked(doc, shown(path))
                    key = json.dumps(doc, sort_keys=True)
                    if key in seen:
                        same.append((shown(path), seen[key]))
                        continue
                    seen[key] = shown(path)
                    progress.append((Path(path).stem, doc))
                else:
                    solutions.append(path)
            except TutorError as err:
                unread.append(str(err))
    if not solutions and not rows and not progress:
        if unread:
            raise TutorError("\n".join(unread))
        raise TutorError(t("report.nothing", where=", ".join(shown(s) for s in paths)))
    grader = _grader(env, exercise, exercises, tolerance)
    rows += [grader.grade(p) for p in solutions]
    from ..render.report import render_report, report_document, report_markdown

    like = {vid: v.like for vid, v in grader.index.items()}  # a roster's variants add up under their exercise
    doc = report_document(class_report(rows, like=like) if rows else None,
                          class_progress(progress, like=like) if progress else None,
                          unread=unread, passed_over=passed_over, same=same)
    if fmt is ReportFormat.json:
        write_json(doc)
    elif fmt is ReportFormat.markdown:
        write_document(report_markdown(doc))
    else:
        render_report(doc, console(env))
    if unread:  # the report holds every reason; on stderr, one line that the run was not whole
        warn(t("cli.error", message=t("report.unread.summary", files=len(unread))))
        raise typer.Exit(EXIT_INPUT)
