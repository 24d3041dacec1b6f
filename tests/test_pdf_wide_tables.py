"""Wide steps print whole (F17 of the class trial): no column of a table is cut off the printed page.

An 8-token exercise's weights printed columns t1 to t5 only, t6 to t8 past the right edge of the A4 page
(16 tokens: t1 to t13), and a step's heading sat alone on a page before its table.  The page now splits a
table wider than the page by columns, each part with the row labels and a caption naming its columns, and
keeps the heading and the formula with the first part.  The PDF tests print with headless Chromium and read
the numbers back with ``pdftotext`` (skipped without them unless ``ATTN_TUTOR_REQUIRE_CHROMIUM=1``, as in
tests/test_pdf_handout.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tutor.authoring.validate import export_handout
from tutor.base.messages import t, use_language
from tutor.exercise.catalog import resolve
from tutor.render.page import PAGE_EM, _column_chunks, page
from tutor.steps import solve

from .test_pdf_handout import require_pdf_tools

#: The finding's exercise (8 tokens) and a 16-token one, the format's largest L, one head to keep the print short.
EIGHT = ("--tokens", "8", "--d-model", "8", "--heads", "1", "--d-k", "4", "--mask", "causal", "--seed", "3")
SIXTEEN = ("--tokens", "16", "--d-model", "16", "--heads", "1", "--d-k", "4", "--mask", "causal", "--seed", "5")
WIDE_STEPS = ("scores", "scaled", "masked", "weights")


def _new(cli, tmp_path, args, name):
    path = tmp_path / f"{name}.yaml"
    code, _, err = cli("new", *args, "--id", name, "-o", path)
    assert code == 0, err
    return path


def _json_steps(cli, path) -> dict:
    """Each wide step of head 1, from ``explain --format json`` (its values, not the page's code)."""
    code, out, err = cli("explain", path, "--format", "json")
    assert code == 0, err
    return {s["id"]: s for s in json.loads(out)["steps"] if s["id"] in WIDE_STEPS and str(s.get("head")) == "0"}


def test_column_runs_fit_and_are_balanced():
    assert _column_chunks([5.0] * 8, 22) == [(0, 3), (4, 7)]
    assert _column_chunks([5.0] * 8, 100) == [(0, 7)]
    assert _column_chunks([5.0] * 16, 36) == [(0, 5), (6, 10), (11, 15)]  # 6 + 5 + 5, not 7 + 7 + 2
    assert _column_chunks([50.0, 5.0, 5.0], 20) == [(0, 0), (1, 2)]  # a column wider than the page alone
    assert _column_chunks([], 10) == [(0, 0)]


def test_the_html_splits_a_wide_step_with_every_column_and_row_label(cli, tmp_path):
    ex = resolve(str(_new(cli, tmp_path, EIGHT, "mid8")))
    html = page(solve(ex))
    weights = re.findall(r"<caption>(weights, shape 8 × 8[^<]*)</caption>(.*?)</table>", html, re.S)
    assert len(weights) > 1, "the 8 × 8 weights is one table: too wide for A4"
    columns = []
    for caption, body in weights:
        first, last = re.search(r"columns? (t\d+)(?: to (t\d+))?$", caption).groups()
        heads = re.findall(r'<th scope="col">([^<]*)</th>', body)
        assert heads[0] == first and heads[-1] == (last or first), caption
        assert re.findall(r'<th scope="row">([^<]*)</th>', body) == [f"t{i}" for i in range(1, 9)]  # row labels repeated
        columns += heads
    assert columns == [f"t{i}" for i in range(1, 9)]
    # the small steps stay one table: q, k, v have 4 columns
    assert re.search(r"<caption>Q, shape 8 × 4</caption>", html)
    assert PAGE_EM < 42.5  # A4 less the 15 mm margins is 42.5 em of 16 px


def test_the_captions_of_the_parts_read_in_chinese(cli, tmp_path):
    ex = resolve(str(_new(cli, tmp_path, EIGHT, "mid8")))
    with use_language("zh"):
        html = page(solve(ex))
        assert t("html.caption.columns", caption="x", first="t1", last="t3") == "x：t1 至 t3 列"
    assert re.search(r"<caption>weights，形状 8 × 8：t1 至 t\d 列</caption>", html)


def _print(ex, tmp_path) -> list[str]:
    """The pages of ``ex``'s answer key printed by Chromium, as ``pdftotext -layout`` reads them."""
    _, pdftotext = require_pdf_tools()
    path = tmp_path / f"{ex.id}.pdf"
    export_handout(solve(ex), path, head=None, precision=4, blank=False, environ=os.environ)
    text = subprocess.run([pdftotext, "-layout", str(path), "-"], capture_output=True, text=True, check=True,
                          timeout=120).stdout
    return text.split("\f")


@pytest.mark.parametrize("args, n", [(EIGHT, 8), (SIXTEEN, 16)], ids=["8-tokens", "16-tokens"])
def test_every_number_of_every_wide_step_prints(cli, tmp_path, args, n):
    path = _new(cli, tmp_path, args, f"wide{n}")
    ex = resolve(str(path))
    values = _json_steps(cli, path)
    assert set(values) == set(WIDE_STEPS), values.keys()
    pages = _print(ex, tmp_path)
    text = "\f".join(pages)
    caption = re.compile(rf"^\s*(\w+), shape {n} × {n}(?:: columns? (t\d+)(?: to (t\d+))?)?\s*$", re.M)
    for sid in WIDE_STEPS:
        # the step's part of the print: from its first caption to the first caption of another step after it
        found = [m for m in caption.finditer(text)]
        mine = [k for k, m in enumerate(found) if m.group(1) == sid]
        assert mine, sid
        start = found[mine[0]].start()
        after = [m.start() for m in found[mine[-1] + 1:]]
        part = text[start:after[0] if after else len(text)]
        shown = []
        for m in (found[k] for k in mine):
            first, last = m.group(2), m.group(3)
            a, b = (int(first[1:]), int((last or first)[1:])) if first else (1, n)
            header = next(line for line in text[m.end():].splitlines() if line.strip())
            assert header.split() == [f"t{i}" for i in range(a, b + 1)], (sid, m.group(0), header)
            shown += header.split()
        assert shown == [f"t{i}" for i in range(1, n + 1)], (sid, shown)  # every column header, each once
        for row in values[sid]["value"]:
            for v in row:
                if not isinstance(v, float) or abs(v) == float("inf"):
                    continue  # −∞ prints as such
                shown_v = str(int(v)) if v.is_integer() else f"{v:.4f}"  # an integer as it is, else its decimal
                assert re.search(rf"(?<![\d.]){re.escape(shown_v.replace('-', '−'))}(?![\d.])", part), (sid, v)
        # the heading and formula are on the page of the step's first table (not alone on the page before)
        page_of_table = text[:start].count("\f")
        assert re.search(r"^\s*\d+\. ", pages[page_of_table], re.M), (sid, pages[page_of_table][:300])
