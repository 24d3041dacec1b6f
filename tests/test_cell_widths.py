"""Every column and every wrapped line measured in terminal cells (issue 22, item 4).

A Chinese character takes two cells of a terminal; ``len`` counts it once.  A
column padded with ``ljust`` or measured with ``len`` comes out ragged as soon
as a label is Chinese.  Here each renderer that lines text up is given labels
in a test catalogue (``xx``: English with Chinese words for the labels) and
the columns are measured with :func:`rich.cells.cell_len`; then a test of the
source keeps ``ljust``/``rjust``/``center`` and ``len`` used as a width out of
``tutor/render``.
"""

from __future__ import annotations

import ast
import io
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from tutor.base.catalogs.en import EN
from tutor.base.messages import CATALOGS, use_language

from .conftest import REPO

#: The labels the tests give in Chinese (every other key stays English).
CHINESE = {
    "check.mark.correct": "✓ 正确",
    "check.mark.wrong": "✗ 错误",
    "check.step_of_head": "{step}（第 {head} 个头）",
    "check.step_of_kv_head": "{step}（K/V 头 {kv}）",
    "practice.label.of_head": "{name}（第 {head} 个头）",
    "practice.status.first": "一次答对",
    "practice.status.retry": "答错 {wrong} 次后答对",
    "code.list.done": "已完成",
    "code.list.pending": "未完成",
    "code.list.review": "待复习",
    "stats.col.step": "步骤",
    "stats.col.right": "答对",
    "stats.col.graded": "已判分",
    "stats.col.accuracy": "正确率",
    "stats.col.shown": "已显示",
    "stats.col.skipped": "已跳过",
    "stats.col.due": "到期",
    "stats.col.retention": "记忆保持率",
    "stats.due.now": "现在",
}


@pytest.fixture
def chinese(monkeypatch):
    """Speak ``xx``: English, with :data:`CHINESE`'s labels."""
    monkeypatch.setitem(CATALOGS, "xx", {**EN, **CHINESE})
    with use_language("xx"):
        yield


def recording(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), record=True, color_system=None, highlight=False,
                   markup=False, emoji=False, legacy_windows=False)


def shown_lines(console: Console) -> list[str]:
    return console.export_text(styles=False).rstrip("\n").split("\n")


def cell_at(line: str, text: str) -> int:
    """The cell where ``text`` starts in ``line`` (the columns before it, as a terminal shows them)."""
    return cell_len(line[:line.index(text)])


def token_ends(line: str) -> list[int]:
    """The cell after each space-separated token of ``line``: where a right-aligned column ends."""
    return [cell_len(line[:m.end()]) for m in re.finditer(r"\S+", line)]


# --- (a) the renderers, given Chinese labels ------------------------------------------------------


def test_the_check_reports_step_column_lines_up_in_cells(chinese):
    """The verdict word and the step's name are padded in cells: each step's detail starts in one column."""
    from tutor.audit.check import audit
    from tutor.audit.plausibility import label
    from tutor.audit.solution import read_solution
    from tutor.render.check import render

    data = REPO / "tests" / "data" / "check"
    report = audit(read_solution((data / "two-head-causal-mask-zero.yaml").read_text(), "sol.yaml", base=data))
    console = recording(200)
    render(report, console)
    names = sorted({str(label(report.exercise, *s.key)) for s in report.steps}, key=len, reverse=True)
    assert any("（第" in n for n in names)  # the test's point: names of unequal widths, some Chinese
    starts = set()
    for line in shown_lines(console):
        if line.startswith(("  ✓ 正确", "  ✗ 错误")):
            rest = line[len("  ✓ 正确"):].lstrip(" ")
            name = next(n for n in names if rest.startswith(n))  # the longest first: weights（…） before weights
            after = rest[len(name):]
            detail = after.lstrip(" ")
            starts.add(cell_len(line) - cell_len(detail))
    assert len(starts) == 1, starts


def test_the_practice_summary_lines_up_in_cells(chinese):
    """A step's status after its label padded in cells, whatever the label's characters."""
    from tutor import practice as quiz
    from tutor.exercise.catalog import resolve_id
    from tutor.render.quiz import QuizRenderer
    from tutor.steps import solve

    sol = solve(resolve_id("two-head-causal-3x4"))
    steps = [s for s in sol.steps if s.head == 0][:4] + [s for s in sol.steps if s.head == 1][:4] + list(sol.layer_steps)
    results = tuple(quiz.Result(step=s, outcome="correct", attempts=n % 2) for n, s in enumerate(steps))
    console = recording(120)
    QuizRenderer(console).on_summary(quiz.Summary(results, "done"))
    rows = [line for line in shown_lines(console) if re.match(r"\s+\d+\. ", line)]
    assert len(rows) == len(steps) and any("（第" in r for r in rows)
    assert len({cell_at(r, "一次答对" if "一次答对" in r else "答错") for r in rows}) == 1


def test_the_kata_list_lines_up_in_cells(chinese):
    from tutor.render.katas import list_lines

    rows = [{"id": "sdpa", "title": "TITLE-A", "done": True}, {"id": "mha", "title": "TITLE-B", "done": False},
            {"id": "gqa", "title": "TITLE-C", "done": False, "review_due": True}]
    lines = list_lines(rows)[:3]
    assert len({cell_at(line, "TITLE-") for line in lines}) == 1


def test_a_mask_grid_with_chinese_labels_lines_up(chinese):
    """The drill's grid (labels padded, cells right-aligned in cells), whole and split into column groups."""
    from tutor.drills.masks import grid
    from tutor.render.drill import DrillView

    rows = grid(((0.0, float("-inf"), float("-inf")), (0.0, 0.0, float("-inf")), (0.0, 0.0, 0.0)), "additive",
                row_label="查询", col_label="键")
    head, *body = rows
    assert all(token_ends(r)[1:] == token_ends(head) for r in body)  # a row: its label, then the cells
    for width in (80, 20):  # whole, then split into groups of columns that fit
        console = recording(width)
        DrillView(console).grid(rows)
        printed = shown_lines(console)
        assert all(cell_len(line) <= width for line in printed)
        groups = [printed[i:i + len(rows)] for i in range(0, len(printed), len(rows))]
        assert len(groups) == (1 if width == 80 else 2), printed
        for head_line, *row_lines in groups:
            assert all(token_ends(r)[1:] == token_ends(head_line) for r in row_lines)


def test_tables_split_by_the_cells_their_labels_take():
    """Column labels of Chinese words: the groups are chosen by cells, so no label is folded."""
    from tutor.render.rich import RichRenderer

    cols = ["注意力分数", "缩放因子", "注意力权重", "输出投影", "查询向量", "键向量"]
    cells = [[f"{i}.{j}" for j in range(len(cols))] for i in range(2)]
    console = recording(50)
    r = RichRenderer(console)
    for table in r.tables(cells, ["第一行", "第二行"], cols):
        console.print(table)
    text = console.export_text(styles=False)
    assert all(c in text for c in cols)  # each label whole, on one line
    assert all(cell_len(line) <= 50 for line in text.split("\n"))


def test_the_stats_tables_split_by_cells(chinese):
    from tutor.render.rich import RichRenderer
    from tutor.render.stats import _step_tables

    steps = [{"step": name, "correct": 3, "graded": 4, "accuracy": 0.75, "shown": 0, "skipped": 1, "due": None,
              "retention": 0.9} for name in ("scores", "注意力权重（第 2 个头）")]
    console = recording(60)
    for item in _step_tables(steps, RichRenderer(console), datetime(2025, 1, 1, tzinfo=UTC)):
        console.print(item)
    text = console.export_text(styles=False)
    assert all(CHINESE[f"stats.col.{c}"] in text for c in ("right", "graded", "accuracy", "retention"))
    assert "注意力权重（第 2 个头）" in text
    assert all(cell_len(line) <= 60 for line in text.split("\n"))


def test_packed_lists_and_commands_fit_in_cells():
    from tutor.render.text import pack, shell_lines

    labels = [f"（猫{i}，坐{i}）" for i in range(8)]
    for line in pack(labels, 30).split("\n"):
        assert cell_len(line) <= 30
    argv = ["attn-tutor", "practice", "/tmp/练习文件夹/多头注意力/单头练习.yaml"]
    for width in (20, 30, 60):
        assert all(cell_len(line) <= width for line in shell_lines(argv, width))


def test_wrapped_text_fits_in_cells_and_ascii_wraps_as_textwrap():
    import textwrap

    from tutor.base.cells import wrap

    text = "在 PyTorch 中，注意力分数（scores）先除以 √d_k，再沿每一行做 softmax，得到注意力权重。" * 3
    for width in (20, 40, 78):
        lines = wrap(text, width, initial="# ", subsequent="# ")
        assert all(cell_len(line) <= width for line in lines)
        assert "".join(line[2:] for line in lines).replace(" ", "") == text.replace(" ", "")
        assert not any(line[2:3] in "，。）" for line in lines[1:])  # no line starts with closing punctuation
    english = "Small integers on purpose, so that Q, K, V and the scores can be worked out on paper: non-zero. " * 4
    assert wrap(english, 40, initial="# ", subsequent="# ") == textwrap.wrap(english, 40, initial_indent="# ",
                                                                              subsequent_indent="# ")


def test_the_helpers_pad_by_cells():
    from tutor.base.cells import pad, pad_left, widest, width

    assert width("注意力") == 6 and widest(["a", "注意力", "abcd"]) == 6
    assert cell_len(pad("分数", 8)) == cell_len(pad("scores", 8)) == 8
    assert cell_len(pad_left("分数", 8)) == 8 and pad_left("分数", 8).endswith("分数")


# --- (b) no width by len() in tutor/render ----------------------------------------------------------

RENDER = REPO / "tutor" / "render"
PACKAGE = REPO / "tutor"

#: Names a width goes by: a len() assigned to one, compared or added with one, is a measure of layout.
_WIDTHY = re.compile(r"width|^(room|column|budget|label_w|step_w|hang|pad|at|indent)$", re.I)

#: ``len()`` that the test reads as layout but that counts something other than characters shown, by
#: ``(module, source of the call, source of its statement's start)``, each with the reason.
LEN_ALLOWED: dict[tuple[str, str], str] = {
    ("tutor/render/rich.py", "len(text)"): "indent = len(text) - len(body): the leading spaces, one cell each",
    ("tutor/render/rich.py", "len(body)"): "indent = len(text) - len(body): the leading spaces, one cell each",
    ("tutor/render/stats.py", "len(group)"): "3 * (len(group) + 1): the borders of a group, one per column",
    ("tutor/render/text.py", "len(argv)"): "n == len(argv) - 1: the last word of a command, an index",
    ("tutor/render/markdown.py", "len(r)"): "a code span's fence: the longest run of backticks, counted in characters",
}

#: Format specs that align a value, allowed because the value is a number or ASCII code, by
#: ``(module, source of the value)``.
ALIGN_ALLOWED: dict[tuple[str, str], str] = {
    ("tutor/render/quiz.py", "n"): "a step's number (digits)",
    ("tutor/render/tiled_practice.py", "n"): "a quantity's number (digits)",
    ("tutor/render/katas.py", "'True' if x else 'False'"): "a boolean entry of an array, ASCII",
    ("tutor/render/katas.py", "float(x)"): "a float entry of an array",
    ("tutor/authoring/write.py", "v"): "an integer of a generated matrix, digits",
}


def layout_lens(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, source)`` of each ``len()`` used as a width: inside ``max``/``min`` (the widest), multiplying a
    string (spaces), compared or added with a width, in a format spec, or assigned to a width; not inside
    ``range()`` (an index)."""
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"):
            continue
        x: ast.AST = node
        layout = indexed = False
        while x in parents and not isinstance(parents[x], ast.stmt):
            a = parents[x]
            if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in ("max", "min"):
                layout = True
            elif isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == "range":
                indexed = True
            elif isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mult) and any(
                    isinstance(s, ast.Constant) and isinstance(s.value, str) for s in (a.left, a.right)):
                layout = True
            elif isinstance(a, (ast.Compare, ast.BinOp)) and any(
                    (isinstance(s, ast.Attribute) and _WIDTHY.search(s.attr))
                    or (isinstance(s, ast.Name) and _WIDTHY.search(s.id)) for s in ast.walk(a)):
                layout = True
            elif isinstance(a, ast.FormattedValue) and x is a.format_spec:
                layout = True
            x = a
        statement = parents.get(x)
        if isinstance(statement, ast.Assign) and any(
                isinstance(target, ast.Name) and _WIDTHY.search(target.id) for target in statement.targets):
            layout = True
        if layout and not indexed:
            out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def padding_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, source)`` of each ``.ljust(``, ``.rjust(``, ``.center(`` and of each value a format spec aligns
    (``:<10``, ``:>{w}``, ``:^8``)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("ljust", "rjust", "center"):
            out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = ast.unparse(node.format_spec)
            if re.match(r"^f?['\"][^'\"]?[<>^=]", spec):
                out.append((node.lineno, ast.unparse(node.value)))
    return out


def _module(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_no_width_in_tutor_render_is_taken_by_len():
    bad = [f"{_module(p)}:{line}: {src}" for p in sorted(RENDER.rglob("*.py"))
           for line, src in layout_lens(ast.parse(p.read_text(encoding="utf-8")))
           if (_module(p), src) not in LEN_ALLOWED]
    assert bad == [], "measure text with tutor.base.cells (width, widest), not len:\n" + "\n".join(bad)


def test_nothing_is_padded_by_characters():
    """No ``ljust``/``rjust``/``center`` and no aligning format spec on text anywhere in the package:
    pad with tutor.base.cells (pad, pad_left)."""
    bad = [f"{_module(p)}:{line}: {src}" for p in sorted(PACKAGE.rglob("*.py")) if p.name != "cells.py"
           for line, src in padding_calls(ast.parse(p.read_text(encoding="utf-8")))
           if (_module(p), src) not in ALIGN_ALLOWED]
    assert bad == [], "pad with tutor.base.cells.pad / pad_left (cells), not by characters:\n" + "\n".join(bad)


def test_the_allowances_are_still_needed():
    lens = {(_module(p), src) for p in RENDER.rglob("*.py") for _, src in layout_lens(ast.parse(p.read_text()))}
    aligns = {(_module(p), src) for p in PACKAGE.rglob("*.py") for _, src in padding_calls(ast.parse(p.read_text()))}
    assert set(LEN_ALLOWED) <= lens and set(ALIGN_ALLOWED) <= aligns


def test_the_source_tests_find_what_they_look_for():
    source = '''
def f(rows, labels, console, title, n):
    w = max(len(r) for r in labels)
    hang = " " * len(title)
    if len(title) + 8 > console.width:
        pass
    line = f"{title:<{len(title)}}"
    width = len(title)
    a = title.ljust(10) + title.rjust(w) + title.center(4)
    b = f"{title:<12} {n:>2}"
    for i in range(len(rows)):
        pass
    count = len(rows)
'''
    tree = ast.parse(source)
    assert [line - 2 for line, _ in layout_lens(tree)] == [1, 2, 3, 5, 6]
    assert sorted(line - 2 for line, _ in padding_calls(tree)) == [5, 7, 7, 7, 8, 8]
