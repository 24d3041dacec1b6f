"""`check`: the errata auditor for written solutions (issue 4).

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

from typing import TYPE_CHECKING, Annotated

import typer

from ..base.ascii import asciify, is_utf
from ..base.messages import t
from .common import (
    EXIT_WRONG,
    ExercisesOpt,
    Format,
    FormatOpt,
    SolutionWrong,
    console,
    environment,
    folders,
    warn,
    write_document,
    write_json,
)

if TYPE_CHECKING:
    from ..audit.solution import SolutionFile
    from ..base.env import Env


def check(
    ctx: typer.Context,
    solution: Annotated[str, typer.Argument(help=t("cli.check.solution"))],
    exercise: Annotated[str | None, typer.Option("--exercise", help=t("cli.check.exercise"))] = None,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help=t("cli.check.tolerance"),
                                                    show_default=False)] = None,
    fmt: FormatOpt = Format.rich,
    exercises: ExercisesOpt = None,
) -> None:
    """Audit a solution file against its exercise; raise :class:`SolutionWrong` when it is wrong."""
    from ..audit.check import audit
    from ..audit.solution import load_solution
    from ..authoring.validate import warning_text
    from .practice import check_tolerance

    check_tolerance(tolerance)
    env = environment(ctx)
    sf = load_solution(solution, exercise=exercise, folders=folders(env, exercises))
    if sf.tiled is not None:  # a worked online softmax (issue 13): judged on its own, after any steps
        _check_tiled(env, sf, tolerance, fmt)
        return
    report = audit(sf, tolerance=tolerance)
    if fmt is Format.json:
        from ..render.check import dumps

        write_document(dumps(report))
    else:
        from ..render.check import render

        for p in report.solution.warnings:
            warn(warning_text(p))
        render(report, console(env))
    if report.exit_code == EXIT_WRONG:
        raise SolutionWrong()  # exit code 1, the one way to it


def _check_tiled(env: Env, sf: SolutionFile, tolerance: float | None, fmt: Format) -> None:
    """``check`` of a file with a ``tiled:`` part (and maybe steps): both reports, under the heading that
    names the file, its exercise, and its ``title:`` and ``source:`` (in JSON too, with its warnings, as
    for steps alone), on a console of ``env``; exit 1 when either is wrong."""
    import json

    from ..audit.check import audit
    from ..authoring.validate import warning_text
    from ..flash.check import audit_tiled, tiled_json, tiled_lines

    assert sf.tiled is not None  # called only for a file with a tiled: part
    rep = audit_tiled(sf.exercise, sf.tiled, tolerance=tolerance)
    report = audit(sf, tolerance=tolerance) if sf.steps else None
    wrong = not rep.ok or (report is not None and report.exit_code == EXIT_WRONG)
    if fmt is Format.json:
        from ..render.check import dumps, file_dict, warnings_list

        doc = json.loads(dumps(report)) if report is not None else {**file_dict(sf), "warnings": warnings_list(sf)}
        doc["tiled"] = tiled_json(sf.exercise, rep)
        doc["verdict"], doc["exit_code"] = ("wrong", EXIT_WRONG) if wrong else ("correct", 0)
        write_json(doc)
    else:
        from rich.padding import Padding
        from rich.text import Text

        from ..render.check import render, render_heading

        for p in sf.warnings:
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
    if wrong:
        raise SolutionWrong()
