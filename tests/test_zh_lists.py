"""Lists in Chinese prose are joined by the catalogue's ``list.sep`` (、), never by an ASCII ``", "``.

A few bundled exercises, their token labels turned into Chinese words (so that a list of them joined by
``", "`` would put an ASCII comma between two Chinese words), explained in Chinese as Markdown, in the
terminal and backward, and a solution file checked in Chinese: no line has an ASCII ``", "`` beside a
Chinese character outside notation (a cell ``[猫, 坐]``, a tuple, math, a matrix).  The lists a reader meets
there (rows of X, the scores' axes, the keys a mask keeps, the heads sharing a K/V head) are read back
joined by 、.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import yaml

BUNDLED = Path(__file__).parent.parent / "exercises"
WORDS = ["猫", "坐", "垫子", "上面", "很", "好"]
CJK = r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]"
IDS = ["single-head-3x4", "fully-masked-row-3x3", "gqa-four-heads-2x4", "causal-left-padding-4x2",
       "decode-one-token-cache-3", "alibi-three-heads-3x2", "cross-attention-2x3"]


def _in_chinese(tmp_path: Path, exercise_id: str) -> Path:
    """Bundled exercise ``exercise_id`` with Chinese words as its token labels (queries, keys, past tokens)."""
    raw = yaml.safe_load((BUNDLED / f"{exercise_id}.yaml").read_text(encoding="utf-8"))
    for key in [k for k in raw if k.endswith("tokens")]:
        raw[key] = [f"{k[0]}{w}" if key != "tokens" else w for k, w in zip([key] * len(raw[key]), WORDS, strict=False)]
        raw[key] = [f"键{i + 1}" for i in range(len(raw[key]))] if key == "kv_tokens" else raw[key]
        raw[key] = [f"旧{w}" for w in raw[key]] if key == "past_tokens" else raw[key]
    raw["id"] = f"{exercise_id}-zh"
    path = tmp_path / f"{exercise_id}.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def prose_commas(text: str) -> list[str]:
    """The lines with an ASCII ``", "`` beside a Chinese character (or a word ending or starting with one),
    once notation is taken out: math ``$…$``, brackets ``[…]`` (a cell, a matrix row, a shape; also one cut
    by the line's end), parentheses ``(…)`` (a cell, a tuple, a call)."""
    found = []
    for line in text.splitlines():
        s = re.sub(r"\$[^$]*\$", " ", line)
        before = None
        while before != s:
            before, s = s, re.sub(r"\\?\[[^\[\]]*\\?\]|\([^()]*\)", " ", s)
        s = re.sub(r"\[[^\]]*$|^[^\[]*\]", " ", s)  # a bracket the terminal's wrapping cut
        if re.search(rf"{CJK}[^,\s]*, |, [^,\s]*{CJK}", s):
            found.append(line.strip())
    return found


def _page_text(page: str) -> str:
    """An HTML page's text as a reader sees it: no head, no MathML (math is notation), each element on a line."""
    page = re.sub(r"<head>.*?</head>|<math\b.*?</math>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]*>", "\n", page))


def test_the_scan_finds_a_list_joined_by_an_ascii_comma_and_passes_notation():
    assert prose_commas("X 的各行：猫, 坐, 垫子。") == ["X 的各行：猫, 坐, 垫子。"]
    assert prose_commas("a: 保留 a, b；屏蔽 c（−∞）") == ["a: 保留 a, b；屏蔽 c（−∞）"]
    assert prose_commas("- Q\\[猫, d1\\] = 1·1 + 0·0 = 1\n(猫, 坐)、(坐, 猫): 1/2\n$x_{猫, 坐}$") == []
    assert prose_commas("X 的各行：猫、坐、垫子。\n第 1 个 K/V 头由头 1、2 共享") == []


@pytest.mark.parametrize("exercise_id", IDS)
def test_explain_in_chinese_joins_its_lists_with_the_catalogues_separator(cli, tmp_path, exercise_id):
    path = _in_chinese(tmp_path, exercise_id)
    shown = []
    for args in (["--format", "markdown"], [], ["--format", "html"], ["--backward"]):
        code, out, err = cli("--lang", "zh", "explain", path, *args)
        if args == ["--backward"] and code == 2:  # an exercise whose backward pass is refused says so
            continue
        assert code == 0, err
        shown.append(_page_text(out) if args == ["--format", "html"] else out)
    assert [line for out in shown for line in prose_commas(out)] == []
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert f"X 的各行：{'、'.join(raw['tokens'])}。" in shown[0]  # rows of X, in the handout


def test_the_lists_of_a_worked_solution_read_back_joined_by_the_chinese_separator(cli, tmp_path):
    """By hand from the files: the scores' axes, a mask's kept and blocked keys, the heads of a K/V group."""
    out = cli("--lang", "zh", "explain", _in_chinese(tmp_path, "single-head-3x4"), "--format", "markdown").out
    assert "行对应查询（猫、坐、垫子）；列对应键（猫、坐、垫子）。" in out
    out = cli("--lang", "zh", "explain", _in_chinese(tmp_path, "causal-left-padding-4x2")).out
    assert "遮蔽 猫、垫子、上面（−∞）" in out  # the padded query 猫 may attend to no key
    out = cli("--lang", "zh", "explain", _in_chinese(tmp_path, "gqa-four-heads-2x4"), "--format", "markdown").out
    assert "由查询头 1、2 共享" in out and "由查询头 3、4 共享" in out


def test_check_in_chinese_joins_its_lists_with_the_catalogues_separator(cli, tmp_path):
    """A solution of fully-masked-row-3x3 (its third query may attend to no key) with uniform weights on
    that row: the findings list cells and rows; none by an ASCII comma beside Chinese."""
    path = _in_chinese(tmp_path, "fully-masked-row-3x3")
    sol = tmp_path / "s.yaml"
    sol.write_text(f"exercise: {path.name}\nweights: [[0.5, 0.5, 0], [~, ~, ~], [0.3333, 0.3333, 0.3333]]\n",
                   encoding="utf-8")
    code, out, err = cli("--lang", "zh", "check", sol)
    assert code == 1, err
    assert "垫子" in out and prose_commas(out) == []
    sol.write_text(f"exercise: {path.name}\nweights: [[0.5, 0.5, 0], [~, ~, ~], [0, 0, 0]]\n", encoding="utf-8")
    code, out, err = cli("--lang", "zh", "check", sol)
    assert code == 0, err
    assert "垫子" in out and prose_commas(out) == []


def test_the_masks_drill_lists_its_rows_and_lengths_with_the_chinese_separator():
    """Left padding (lengths 4 and 2, sequence 2 asked): queries 1 and 2 see no key (by hand: causal, and
    keys 1, 2 are padding); the setting's lengths and the rows are lists in prose."""
    from tutor.base.messages import use_language
    from tutor.drills import masks

    s = masks.Scenario("left_padding", 2, 4, 4, "top_left", (4, 2), True, 1)
    with use_language("zh"):
        lines = masks.every_convention(s)
        setting = masks._setting(s)
    assert "没有可关注的键的行：q1、q2。" in lines
    assert "4、2" in setting and prose_commas(setting) == []
