"""`check`: the errata auditor for written solutions (issue 4).

Exit codes: 0 every given step right and plausible; 1 something is wrong
(raised as :class:`tutor.cli.common.SolutionWrong`, the only way to exit
code 1); 2 the file is unusable (raised as a :class:`tutor.errors.TutorError`,
which :func:`tutor.cli.main` prints as ``error: file:line:col: ...``, and
with ``--format json`` also as the error document on stdout); 3 attn-tutor
itself failed.  The file's warnings (a plain ``010``) do not change the exit
code: they are ``file:line:col: warning: ...`` lines on stderr, or the
``warnings`` of the JSON report.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..messages import t
from .common import EXIT_WRONG, ExercisesOpt, Format, FormatOpt, SolutionWrong, console, warn, write_document


def check(
    solution: Annotated[str, typer.Argument(help=t("cli.check.solution"))],
    exercise: Annotated[str | None, typer.Option("--exercise", help=t("cli.check.exercise"))] = None,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help=t("cli.check.tolerance"),
                                                    show_default=False)] = None,
    fmt: FormatOpt = Format.rich,
    exercises: ExercisesOpt = None,
) -> None:
    """Audit a solution file against its exercise; raise :class:`SolutionWrong` when it is wrong."""
    from ..authoring import warning_text
    from ..check import audit
    from ..solution_file import load_solution
    from .practice import check_tolerance

    check_tolerance(tolerance)
    report = audit(load_solution(solution, exercise=exercise, folders=exercises or ()), tolerance=tolerance)
    if fmt is Format.json:
        from ..render.check import dumps

        write_document(dumps(report))
    else:
        from ..render.check import render

        for p in report.solution.warnings:
            warn(warning_text(p))
        render(report, console())
    if report.exit_code == EXIT_WRONG:
        raise SolutionWrong()  # exit code 1, the one way to it
