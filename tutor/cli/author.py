"""`validate`, `new`, `schema` (issue 5), and the handout output of `explain`.

For instructors: ``validate`` reports every problem of every exercise file
(exit 0 when all are valid, 2 otherwise; ``--format json`` for a pack's CI),
``new`` writes a commented exercise whose numbers are small enough for
paper, ``schema`` prints the JSON Schema the loader's model produces, and
:func:`handout` writes ``explain`` as Markdown, HTML, SVG or a blank
worksheet.
"""

from __future__ import annotations

import json
import os
import re
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..messages import t
from ..textsafe import shown
from . import Format, FormatOpt, app, console, warn, write, write_document

if TYPE_CHECKING:
    from ..catalog import Catalog
    from ..errors import Problem
    from ..exercise import Validation
    from ..steps import Solution





class MaskChoice(str, Enum):
    """`new --mask`."""

    none = "none"
    causal = "causal"
    padding = "padding"


# --- validate ------------------------------------------------------------------------


def _targets(paths: list[Path]) -> tuple[list[tuple[Path, bool]], list[Problem]]:
    """The files to validate: ``(file, named)``; ``named`` is False for files found in a directory."""
    from ..catalog import yaml_files
    from ..errors import Problem

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

    Returns one :class:`Validation` per file (solution files found in a
    directory are skipped) and the problems that belong to no single file's
    content: missing paths, empty directories, clashing ids.
    """
    from ..catalog import bundled_dir, read_exercise_file, real_path, yaml_files
    from ..errors import Problem
    from ..exercise import Validation

    targets, problems = _targets(paths)
    results: list[Validation] = []
    for file, named in targets:
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


def _problem_dict(p: Problem, severity: str) -> dict[str, Any]:
    return {"file": p.file, "line": p.line, "column": p.column, "field": p.field, "message": p.message,
            "hint": p.hint, "severity": severity, "text": str(p)}


def warning_text(p: Problem) -> str:
    """``file:line:col: warning: field: message (hint)``."""
    rest = str(p)[len(p.location()) + 2:]
    return f"{p.location()}: {t('validate.warning')}: {rest}"


@app.command(help=t("cli.validate.help"))
def validate(
    paths: Annotated[list[Path], typer.Argument(help=t("cli.validate.paths"), show_default=False)],
    fmt: FormatOpt = Format.rich,
) -> None:
    """Validate files and folders; exit 0 when all are valid, 2 otherwise."""
    results, extra = validate_paths(paths)
    by_file: dict[str, list[Problem]] = {}
    for p in extra:
        by_file.setdefault(p.file, []).append(p)
    invalid = sum(1 for r in results if not r.ok or by_file.get(r.file))
    problems = sum(len(r.problems) for r in results) + len(extra)
    ok = problems == 0 and bool(results)
    if fmt is Format.json:
        files = [
            {"file": r.file, "valid": r.ok and not by_file.get(r.file), "id": r.exercise.id if r.exercise else None,
             "problems": [_problem_dict(p, "error") for p in list(r.problems) + by_file.pop(r.file, [])],
             "warnings": [_problem_dict(p, "warning") for p in r.warnings]}
            for r in results
        ]
        other = [_problem_dict(p, "error") for ps in by_file.values() for p in ps]
        write_document(json.dumps({"valid": ok, "files": files, "problems": other,
                          "summary": {"files": len(results), "valid": len(results) - invalid, "invalid": invalid,
                                      "problems": problems, "warnings": sum(len(r.warnings) for r in results)}},
                         indent=1))  # ASCII (non-ASCII and control characters as \u escapes): safe on any stream
    else:
        for r in results:
            for p in r.problems:
                write(str(p))
            for p in by_file.pop(r.file, []):
                write(str(p))
            for p in r.warnings:
                write(warning_text(p))
        for ps in by_file.values():
            for p in ps:
                write(str(p))
        summary = t("validate.summary", files=len(results), valid=len(results) - invalid, invalid=invalid,
                    problems=problems)
        warn(summary)
    raise typer.Exit(0 if ok else 2)


# --- new -----------------------------------------------------------------------------


@app.command(help=t("cli.new.help"))
def new(
    tokens: Annotated[int, typer.Option("--tokens", help=t("cli.new.tokens"), min=1, max=16)] = 3,
    d_model: Annotated[int, typer.Option("--d-model", help=t("cli.new.d_model"), min=1, max=32)] = 4,
    heads: Annotated[int, typer.Option("--heads", help=t("cli.new.heads"), min=1, max=8)] = 1,
    d_k: Annotated[int, typer.Option("--d-k", help=t("cli.new.d_k"), min=1, max=32)] = 2,
    mask: Annotated[MaskChoice, typer.Option("--mask", help=t("cli.new.mask"))] = MaskChoice.none,
    cross: Annotated[int | None, typer.Option("--cross", help=t("cli.new.cross"), min=1, max=16, show_default=False)] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=t("cli.new.seed"), min=0, show_default=False)] = None,
    difficulty: Annotated[int | None, typer.Option("--difficulty", help=t("cli.new.difficulty"), min=1, max=5,
                                                   show_default=False)] = None,
    exercise_id: Annotated[str | None, typer.Option("--id", help=t("cli.new.id"), show_default=False)] = None,
    title: Annotated[str | None, typer.Option("--title", help=t("cli.new.title"), show_default=False)] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help=t("cli.new.output"), show_default=False,
                                                dir_okay=False)] = None,
    force: Annotated[bool, typer.Option("--force", help=t("cli.new.force"))] = False,
) -> None:
    """Write a generated exercise to ``-o FILE`` (never over an existing one without ``--force``) or stdout."""
    from ..errors import TutorError
    from ..exercise import validate_text
    from ..generate import Spec, generate

    if seed is None:
        seed = int.from_bytes(os.urandom(4), "big") % 1_000_000
    spec = Spec(tokens=tokens, d_model=d_model, heads=heads, d_k=d_k, mask=mask.value, cross=cross, seed=seed,
                difficulty=difficulty, id=exercise_id, title=title)
    if exercise_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", exercise_id):
        raise typer.BadParameter(t("new.bad_id", found=exercise_id), param_hint="--id")
    if heads * d_k > 32:
        raise typer.BadParameter(t("new.too_wide", heads=heads, d_k=d_k, product=heads * d_k), param_hint="--heads/--d-k")
    if mask is MaskChoice.padding and (cross or tokens) < 2:
        raise typer.BadParameter(t("new.padding_keys"), param_hint="--mask")
    if title is not None:
        _check_title(title)
    text = generate(spec)
    checked = validate_text(text, "<new>")  # nothing is written until it is valid
    if not checked.ok:  # --id or --title may be invalid; the generator's own numbers always are valid
        for p in checked.problems:
            if p.field in ("id", "title"):
                raise typer.BadParameter(p.message, param_hint=f"--{p.field}")
        raise TutorError("\n".join(str(p) for p in checked.problems))
    if output is None:
        write_document(text)
        return
    if output.exists() and not force:
        raise TutorError(t("new.exists", path=output))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as err:
        raise TutorError(t("new.unwritable", path=output, reason=err.strerror or str(err))) from err
    warn(t("new.wrote", path=output, id=checked.exercise.id if checked.exercise else ""))


def _check_title(title: str) -> None:
    """A usage error for a ``--title`` with a control character (ESC, NUL, ...): it would be written into the file.

    Line breaks and tabs are fine: the title is written on one line, whitespace collapsed.
    """
    import unicodedata

    from ..yamlread import codepoint

    for ch in title:
        if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r":
            raise typer.BadParameter(t("new.bad_title", char=codepoint(ch)), param_hint="--title")


# --- schema --------------------------------------------------------------------------


@app.command(help=t("cli.schema.help"))
def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from ..exercise import json_schema

    write_document(json.dumps(json_schema(), indent=2))


# --- handouts (used by `explain`) -------------------------------------------------------

EXPORT_SUFFIXES = (".html", ".htm", ".svg", ".md")
#: The ``--format`` values each kind of export is: an HTML or SVG page is the terminal output.
EXPORT_FORMATS = {".html": ("html", "rich"), ".htm": ("html", "rich"), ".svg": ("rich",), ".md": ("markdown",)}


def check_export(export: Path, fmt: str, *, explicit: bool, force: bool) -> None:
    """Refuse an ``--export`` that cannot be honoured, before anything is computed.

    Usage errors (exit 2): a suffix that is not one of :data:`EXPORT_SUFFIXES`,
    and a ``--format`` given explicitly that the export is not (``--export
    x.html --format json``: the suffix decides what is written, so the format
    would be ignored).  :class:`TutorError` (exit 2): the file exists and
    ``force`` is False (as ``new -o``), or it exists and is not a regular
    file (a FIFO would block the write; refused even with ``force``).
    """
    from ..errors import TutorError

    suffix = export.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise typer.BadParameter(t("handout.bad_suffix", found=export.suffix or export.name,
                                   choices=", ".join(EXPORT_SUFFIXES)), param_hint="--export")
    if explicit and fmt not in EXPORT_FORMATS[suffix]:
        kind = t(f"handout.kind.{'html' if suffix == '.htm' else suffix[1:]}")
        raise typer.BadParameter(t("handout.format_clash", path=export, found=fmt, kind=kind,
                                   formats=" or ".join(f"--format {f}" for f in EXPORT_FORMATS[suffix])),
                                 param_hint="--format")
    if export.exists() and not export.is_file():
        raise TutorError(t("handout.not_file", path=export))
    if export.exists() and not force:
        raise TutorError(t("new.exists", path=export))


def handout(sol: Solution, fmt: str, *, head: int | None, precision: int, blank: bool, export: Path | None) -> None:
    """Print or export ``sol`` as a handout: ``fmt`` is ``rich``, ``markdown``, ``html`` (or ``json``, not blank).

    With ``export`` the kind of file follows its suffix (``.html``, ``.svg``,
    ``.md``) and nothing is printed on stdout; a one-line note goes to stderr.
    """
    from ..render.html import export_html, export_svg, renderer
    from ..render.markdown import render_markdown

    if export is not None:
        suffix = export.suffix.lower()
        if suffix not in EXPORT_SUFFIXES:
            raise typer.BadParameter(t("handout.bad_suffix", found=export.suffix or export.name,
                                       choices=", ".join(EXPORT_SUFFIXES)), param_hint="--export")
        if suffix == ".md":
            text = render_markdown(sol, head=head, precision=precision, blank=blank)
        elif suffix == ".svg":
            text = export_svg(sol, head=head, precision=precision, blank=blank)
        else:
            text = export_html(sol, head=head, precision=precision, blank=blank)
        try:
            export.write_text(shown(text, keep="\n\t"), encoding="utf-8")  # a page is read with cat too
        except OSError as err:
            from ..errors import TutorError

            raise TutorError(t("new.unwritable", path=export, reason=err.strerror or str(err))) from err
        warn(t("handout.wrote", path=export))
        return
    if fmt == "json":
        raise typer.BadParameter(t("handout.blank_json"), param_hint="--blank")
    if fmt == "markdown":
        write_document(render_markdown(sol, head=head, precision=precision, blank=blank))
    elif fmt == "html":
        write_document(export_html(sol, head=head, precision=precision, blank=blank))
    else:
        renderer(console(), precision, blank).solution(sol, head)


# --- packs (used by `list`) -------------------------------------------------------------


def catalog_rows(cat: Catalog) -> list[dict[str, Any]]:
    """One row per exercise of the catalogue, with where it comes from (``source``)."""
    rows = []
    for entry in cat.entries:
        ex = entry.exercise
        rows.append({
            "id": ex.id,
            "title": ex.title,
            "L": ex.L,
            "L_k": ex.L_k,
            "d_model": ex.d_model,
            "heads": ex.num_heads,
            "mask": ex.mask_kind if ex.key_padding is None else (ex.mask_kind + "+padding" if ex.mask_kind != "none" else "padding"),
            "cross": ex.is_cross,
            "difficulty": ex.difficulty,
            "tags": list(ex.tags),
            "source": entry.source,
            "file": ex.source,
        })
    return rows


def report_catalog_problems(cat: Catalog) -> None:
    """Each problem of the packs (a broken file, an id defined twice) as one ``warning:`` line on stderr."""
    for p in cat.problems:
        warn(f"{t('validate.warning')}: {p}")
