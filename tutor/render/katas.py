"""``attn-tutor code``'s reports as text and as JSON: the katas listed, a check's verdict case by case.

Plain text lines (the command line writes them); verdicts in words and
symbols (``PASS``/``FAIL``, ✓/✗, ``*`` beside a wrong entry), never colour
alone.  Everything the learner's program printed or raised is shown escaped
(:func:`tutor.base.textsafe.shown`): it cannot drive the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..base.cells import pad, widest, wrap
from ..base.messages import t
from ..base.textsafe import lines, shown
from ..katas.judge import PROBLEMS as _PROBLEMS
from ..katas.judge import CaseVerdict, Report
from ..katas.kata import Kata, Phrase
from ..katas.run import Run

__all__ = ["check_document", "check_lines", "list_document", "list_lines", "shown_output"]

MAX_SHOWN_LINES = 20  # lines of the learner's output (or traceback) shown per stream


def _sizes(sizes: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sizes.items() if not k.isdigit())  # "1": a size-1 axis's name


def _given(item: str | Phrase) -> str:
    """A case's ``given`` item as read: a :class:`Phrase` in the run's language, ``exercise:ID`` the bundled
    exercise the numbers come from, notation as it is."""
    if isinstance(item, Phrase):
        return t(f"code.given.{item.key}", **item.fields)
    if item.startswith("exercise:"):
        return t("code.given.exercise", id=item.removeprefix("exercise:"))
    return item


def shown_output(text: str, limit: int = MAX_SHOWN_LINES) -> list[str]:
    """``text`` (what the learner's program wrote) as escaped lines, at most ``limit`` and a count of the rest."""
    rows = [shown(line, keep="\t") for line in lines(text.rstrip("\n"))]
    if len(rows) > limit:
        return rows[:limit] + [t("code.more_lines", n=len(rows) - limit)]
    return rows


def _marked(v: CaseVerdict, kata: Kata) -> list[str]:
    """The slice of the first wrong output that holds its first wrong entry: yours, ``*`` beside each
    wrong entry, and the expected values under it."""
    i = [o.name for o in kata.outputs_of(v.case)].index(v.output or "")
    got, want = v.got[i], v.case.expected[i]
    if got is None or not v.wrong or got.ndim == 0:
        return []
    index = v.wrong[0][0]
    lead = index[:-2] if got.ndim >= 2 else ()
    g, w = (got[lead], want[lead]) if lead else (got, want)
    if g.ndim == 1:
        g, w = g[None], w[None]
    if g.shape[0] > 8 or g.shape[1] > 8:
        return []
    rtol, atol = (1e-4, 1e-5) if v.case.dtype == "float32" else (1e-7, 1e-9)
    bad = ~np.isclose(g.astype(float), w.astype(float), rtol=rtol, atol=atol, equal_nan=True)
    name = f"{v.output}[{', '.join(str(j) for j in lead)}]" if lead else str(v.output)
    out = ["      " + t("code.yours_marked", name=name)]
    out += ["        " + " ".join(f"{_cell(x)}{'*' if b else ' '}" for x, b in zip(row, brow, strict=True))
            for row, brow in zip(g, bad, strict=True)]
    out.append("      " + t("code.expected_here"))
    out += ["        " + " ".join(f"{_cell(x)} " for x in row) for row in w]
    return out


def _cell(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return f"{'True' if x else 'False':>8}"
    return f"{float(x):>8.4f}" if np.isfinite(x) else f"{float(x):>8}"


def _wrapped(text: str, indent: int, width: int) -> list[str]:
    """``text`` wrapped to ``width`` cells, every line indented by ``indent`` and its continuations by 2 more."""
    lead = " " * indent
    return wrap(text, max(40, width - 1), initial=lead, subsequent=lead + "  ", break_long_words=False,
                break_on_hyphens=False) or [lead]


def check_lines(report: Report, run: Run, file: str, follow_ups: Sequence[tuple[str, str, str]] = (), *,
                width: int = 100) -> list[str]:
    """The report of ``code check`` as text lines, sentences wrapped to ``width`` columns."""
    kata = report.kata
    fields = {"file": shown(file), "kata": kata.id, "flavour": t(f"code.flavour.{report.flavour}")}
    title = t("code.check.title", **fields, why=t(f"code.flavour.why.{run.why}")) if run.why else \
        t("code.check.title.plain", **fields)
    out = _wrapped(title, 0, width)
    shown_keys: set[tuple[str, ...]] = set()
    for v in report.cases:
        mark = "✓" if v.passed else "✗"
        given = t("code.given.sep").join((_sizes(v.case.sizes), v.case.dtype, *map(_given, v.case.given)))
        out += _wrapped(f"{mark} {pad(v.case.id, 18)} {given}", 2, width)  # columns: the mark, the case, its inputs
        if v.passed:
            continue
        keys = (*(d.key for d in v.diagnoses), v.exception or "", v.traceback)
        first = not shown_keys
        if v.problem == "values":
            index = [o.name for o in kata.outputs_of(v.case)].index(v.output or "")
            out.append("      " + t("code.wrong_entries", name=v.output, n=v.n_wrong,
                                    total=int(v.case.expected[index].size)))
            if first:
                out += _marked(v, kata)
        if keys in shown_keys:
            out.append("      " + t("code.same_as_above"))
            continue
        shown_keys.add(keys)
        named = [d for d in v.diagnoses if d.key not in _PROBLEMS]
        if len(named) > 1:
            out.append("      " + t("code.one_of"))
        for d in v.diagnoses:
            out += _wrapped(t("code.mistake_line", message=shown(d.message)) if d.key not in _PROBLEMS
                            else shown(d.message), 6, width)
        if v.traceback:
            out += ["        " + line for line in shown_output(v.traceback)]
    if run.status == "hang":
        out.append("  " + t("code.hang.marked", case=run.hang_case or "?"))
    elif run.status == "crash":
        out.append("  " + t("code.crash.marked", case=run.hang_case or "?", code=run.returncode))
    total, not_run = _counts(report, run)
    passed = sum(v.passed for v in report.cases)
    for stream, text, dropped in (("stdout", run.stdout, run.stdout_dropped), ("stderr", run.stderr, run.stderr_dropped)):
        if text.strip() or dropped:
            out.append(t(f"code.printed.{stream}"))
            out += ["  | " + line for line in shown_output(text)]
        if dropped:  # only the first KEEP_OUTPUT bytes were kept: say the rest was cut, and how much
            out += _wrapped(t("code.printed.cut", size=_size_text(dropped)), 2, width)
    if report.passed and run.status == "ran":
        out.append(t("code.passed", n=total))
        if follow_ups:
            out += _wrapped(t("code.follow_ups"), 0, width)
            for _, q, topic in follow_ups:  # wrapped as every sentence is: a question is a line or two long
                out += _wrapped(t("code.follow_up.item", question=shown(q), topic=topic), 2, width)
    elif run.status in ("hang", "crash") and not_run:
        out.append(t(f"code.failed.not_run_after_{run.status}", passed=passed, n=total, not_run=not_run))
    else:
        out.append(t("code.failed", passed=passed, n=total))
    return out


def _counts(report: Report, run: Run) -> tuple[int, int]:
    """``(total, not_run)``: the cases of the file's flavour (the run's ``planned``: a hang or a crash stops the
    run before the rest), and how many of them were neither reported nor the one stopped."""
    stopped = 1 if run.status in ("hang", "crash") and run.hang_case is not None else 0
    seen = len(report.cases) + stopped
    total = max(seen, run.planned or 0) if run.status in ("hang", "crash") else len(report.cases)
    return total, total - seen


def _size_text(n: int) -> str:
    """A count of bytes as read: ``812 bytes``, ``63.5 KB``, ``49.9 MB`` (powers of 1000)."""
    if n < 1000:
        return f"{n} B"
    if n < 1000**2:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1000**2:.1f} MB"


def check_document(report: Report, run: Run, file: str, follow_ups: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    """``code check --format json``: ``{"kata", "flavour", "passed", "cases": [{"id", "passed", "diagnoses"…}], …}``."""
    kata = report.kata
    def case(v: CaseVerdict) -> dict[str, Any]:
        names = [o.name for o in kata.outputs_of(v.case)]
        doc: dict[str, Any] = {
            "id": v.case.id, "passed": v.passed, "dtype": v.case.dtype, "sizes": dict(v.case.sizes),
            # words in the run's language; notation and ``exercise:ID`` as they are
            "given": [g if isinstance(g, str) else _given(g) for g in v.case.given],
            "hand_sized": v.case.hand, "problem": v.problem, "output": v.output,
            "diagnoses": [{"key": d.key, "message": d.message} for d in v.diagnoses],
        }
        if v.problem == "values":
            doc["wrong_entries"] = v.n_wrong
            doc["wrong"] = [{"index": list(i), "expected": _num(e), "got": _num(g)} for i, e, g in v.wrong]
        if v.problem == "shape" and v.output is not None:
            got = v.got[names.index(v.output)]
            doc["shape"] = {"expected": list(v.case.expected[names.index(v.output)].shape),
                            "got": None if got is None else list(got.shape)}
        if v.exception is not None:
            doc["exception"] = v.exception
            doc["traceback"] = v.traceback
        if v.peak is not None:
            doc["peak_bytes"] = v.peak
        return doc

    return {
        "kata": kata.id, "flavour": report.flavour, "flavour_because": run.why, "file": file,
        "passed": report.passed and run.status == "ran",
        "cases": [case(v) for v in report.cases],
        "stopped": None if run.status == "ran" else {"status": run.status, "case": run.hang_case,
                                                      "not_run": _counts(report, run)[1]},
        "mistakes": list(report.mistakes),
        "stdout": run.stdout, "stderr": run.stderr,
        "stdout_cut_bytes": run.stdout_dropped, "stderr_cut_bytes": run.stderr_dropped,
        "follow_ups": [{"id": qid, "question": q, "topic": topic} for qid, q, topic in follow_ups],
    }


def _num(x: float) -> float | str:
    return x if np.isfinite(x) else str(x)


def list_lines(rows: Sequence[Mapping[str, Any]], width: int = 100) -> list[str]:
    """``code list``: each kata, done or pending, and what it asks, within ``width`` cells: the title wrapped
    under its column, or, when the columns leave it less than 20 cells, on lines of its own below."""
    statuses = [t("code.list.review") if r.get("review_due") else t("code.list.done") if r["done"]
                else t("code.list.pending") for r in rows]
    status_cells = max([widest(statuses), 11])
    lead = 2 + 10 + 1 + status_cells + 1  # columns, in cells: a status may be Chinese
    out = []
    for r, status in zip(rows, statuses, strict=True):
        head = f"  {pad(r['id'], 10)} {pad(status, status_cells)} "
        if width - lead >= 20:
            out += wrap(r["title"], width, initial=head, subsequent=" " * lead, break_long_words=False,
                        break_on_hyphens=False)
        else:
            out += [head.rstrip(), *wrap(r["title"], width, initial="    ", subsequent="    ")]
    out += wrap(t("code.list.next"), width, break_long_words=False, break_on_hyphens=False)
    return out


def list_document(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"katas": [dict(r) for r in rows]}

