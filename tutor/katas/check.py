"""``code check``'s work: which kata a file is, its cases run in a child process, the report judged.

:func:`kata_of` finds the kata (``--kata``, else the file's module-level
``KATA = "mha"``, read with :mod:`ast` -- parsed, never run); :func:`check`
runs the file (:mod:`.run`) and judges what it returned (:mod:`.judge`).
What stops the file being run as the kata -- no such file, no kata named, a
syntax error, none of the kata's names defined, an exception while it is
imported, an interpreter that cannot be started -- raises
:class:`CodeFileError` (one line, exit code 2); what its code does on a case
(a wrong value, an exception, a hang) is in the report.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import TutorError
from ..base.messages import t
from ..base.outfile import os_reason
from ..base.textsafe import shown
from . import catalog, harness, run
from .judge import Report, judge
from .kata import Kata

__all__ = ["Checked", "CodeFileError", "check", "kata_of"]

MAX_FILE_BYTES = 1024 * 1024  # a kata's file is a page or two; this is read to find KATA


class CodeFileError(TutorError):
    """The file cannot be run as the kata (exit code 2): one line, and under it the learner's own
    frames when their file raised while it was imported (escaped)."""

    def __init__(self, message: str, traceback: str = "") -> None:
        frames = [shown(line, keep="\t") for line in traceback.rstrip("\n").split("\n") if line.strip()]
        super().__init__("\n".join([message, *frames]))


@dataclass(frozen=True)
class Checked:
    """A check's outcome: the report, and the run it judged (the captured output; a hang or crash)."""

    report: Report
    run: run.Run


def _read(file: Path) -> str:
    try:
        if not file.is_file():
            raise CodeFileError(t("code.file.missing" if not file.exists() else "code.file.not_file",
                                  file=shown(str(file))))
        with file.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise CodeFileError(t("code.file.unreadable", file=shown(str(file)), reason=os_reason(err))) from None
    if len(data) > MAX_FILE_BYTES:
        raise CodeFileError(t("code.file.too_large", file=shown(str(file)), limit="1 MiB"))
    return data.decode("utf-8-sig", "replace")  # a byte-order mark, as Notepad writes, is no syntax error


def kata_of(file: Path, kata: str | None) -> Kata:
    """The kata ``file`` is written for: ``kata`` (``--kata``), else its module-level ``KATA = "…"``.

    Raises :class:`CodeFileError` when the file cannot be read, is not Python, or names no kata, and
    :class:`tutor.base.errors.NotFoundError` for a kata that does not exist.
    """
    text = _read(file)
    if kata is not None:
        return catalog.get(kata)
    try:
        tree = ast.parse(text, filename=str(file))
    except SyntaxError as err:
        raise CodeFileError(_syntax(file, err.lineno, err.offset, err.msg, err.text or "")) from None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "KATA" and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            return catalog.get(node.value.value[:100])
    raise CodeFileError(t("code.file.no_kata", file=shown(str(file)), katas=", ".join(catalog.IDS)))


def _syntax(file: Path, line: int | None, col: int | None, message: str, text: str) -> str:
    text = text.strip()
    return t("code.file.syntax", file=shown(str(file)), line=line or "?", col=col or "?", message=shown(message)[:200],
             text=shown(text[:200]) + ("…" if len(text) > 200 else ""))


def check(file: Path, kata: Kata, *, python: str | None = None, time_limit: float = run.DEFAULT_TIME_LIMIT,
          memory_mb: int = run.DEFAULT_MEMORY_MB, environ: Mapping[str, str] | None = None,
          flavour: str | None = None) -> Checked:
    """Run ``file`` on every case of ``kata`` (in ``flavour`` when given, else the one the file is in) and judge it.  Raises :class:`CodeFileError` when the file
    cannot be run as the kata; ``KeyboardInterrupt`` (the child stopped) on Ctrl-C."""
    cases = kata.cases()
    messages = {name: t(f"code.harness.{name}") for name in harness.MESSAGES}  # the child cannot read the catalogue
    result = run.run(file.resolve(), {**kata.request(), "flavour": flavour, "messages": messages},
                     [c.request() for c in cases], python=python,
                     time_limit=time_limit, memory_mb=memory_mb, environ=environ)
    d = result.detail
    name = shown(str(file))
    if result.status == "no_python":
        raise CodeFileError(t("code.file.no_python", python=shown(d["python"]), reason=shown(d["reason"])))
    if result.status == "syntax":
        raise CodeFileError(_syntax(file, d.get("line"), d.get("col"), d.get("message", ""), d.get("text", "")))
    if result.status == "missing":
        defined = ", ".join(shown(n) for n in d.get("defined", ())) or "-"
        if kata.numpy_name == kata.torch_name:  # a function in both flavours: no class to name
            raise CodeFileError(t("code.file.missing_function", file=name, kata=kata.id, name=kata.numpy_name,
                                  defined=defined))
        raise CodeFileError(t("code.file.missing_name", file=name, kata=kata.id, numpy=kata.numpy_name,
                              torch=kata.torch_name, defined=defined))
    if result.status == "load_error":
        raise CodeFileError(t("code.file.load_error", file=name, exception=shown(d.get("exception", ""))),
                            traceback=d.get("traceback", ""))
    if result.status == "tampered":
        raise CodeFileError(t("code.file.tampered", file=name))
    if result.status in ("hang", "crash") and result.flavour is None:
        key = "code.file.load_hang" if result.status == "hang" else "code.file.load_crash"
        said = " / ".join(shown(line)[:200] for line in (result.stderr + result.stdout).strip().splitlines()[:3]) or "-"
        raise CodeFileError(t(key, file=name, seconds=int(run.LOAD_TIME_LIMIT), code=result.returncode, said=said))
    return Checked(judge(kata, cases, result), result)
