"""The engines return what to say as keys and fields (``Msg``); only the layers that show text translate.

Issue 22, item 4: a worked solution, a diagnosis or an audit finding computed in one language and shown
in another (a cache, a test that switches languages, a JSON consumer) must not carry the first
language's words.  So no module of an engine package calls the translating functions of
:mod:`tutor.base.messages` (``t``, ``plural``, ``join_and``, ``join_sentences``); it builds a
:class:`~tutor.base.messages.Msg` instead, which is put into words when shown.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tutor.base.messages import Msg, use_language

ROOT = Path(__file__).resolve().parent.parent / "tutor"
ENGINES = ("exact", "numeric", "steps", "answers", "mistakes", "production", "audit")
TRANSLATING = {"t", "plural", "join_and", "join_sentences"}


def _translating_calls(path: Path, root: Path = ROOT.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("messages"):
            imported |= {a.asname or a.name for a in node.names if a.name in TRANSLATING}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in imported:
            out.append(f"{path.relative_to(root)}:{node.lineno}: {f.id}(...)")
        elif isinstance(f, ast.Attribute) and f.attr in TRANSLATING and isinstance(f.value, ast.Name) \
                and f.value.id == "messages":
            out.append(f"{path.relative_to(root)}:{node.lineno}: messages.{f.attr}(...)")
    return out


@pytest.mark.parametrize("package", ENGINES)
def test_no_engine_translates(package):
    found = [c for p in sorted((ROOT / package).rglob("*.py")) for c in _translating_calls(p)]
    assert not found, "an engine puts words in a language; return a Msg instead:\n" + "\n".join(found)


def test_the_check_finds_a_translating_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tutor.base.messages import t as _t\nfrom tutor.base import messages\n"
                   "x = _t('kind.null')\ny = messages.plural('count.rows', 2)\n", encoding="utf-8")
    assert _translating_calls(bad, tmp_path) == ["bad.py:3: _t(...)", "bad.py:4: messages.plural(...)"]


def test_a_msg_is_put_into_words_when_shown():
    m = Msg("check.more", count=3)
    assert str(m) == "… and 3 more"
    with use_language("zh"):
        assert str(m) == "…… 还有 3 个"
        assert f"[{m}]" == "[…… 还有 3 个]"
    assert str(Msg.and_list(["a", Msg("kind.null")])) == "a and empty"
    assert str(Msg.plural("count.rows", 1)) == "1 row"
    assert Msg("check.more", count=3) == m and Msg("check.more", count=4) != m


# --- what the engines build in one language reads, when shown, as built in the other ----------------------

from tutor.exercise.catalog import bundled  # noqa: E402
from tutor.mistakes.diagnose import diagnose  # noqa: E402
from tutor.render.json import dumps  # noqa: E402
from tutor.render.markdown import render_markdown  # noqa: E402
from tutor.steps import solve  # noqa: E402

EXERCISES = ("single-head-3x4", "decode-one-token-cache-3", "gqa-four-heads-2x4", "fully-masked-row-3x3",
             "alibi-causal-3x2")


def _by_id(name):
    return next(e for e in bundled() if e.id == name)


@pytest.mark.parametrize("name", EXERCISES)
@pytest.mark.parametrize("backward", [False, True])
def test_a_solution_built_in_chinese_is_shown_in_english_as_one_built_in_english(name, backward):
    ex = _by_id(name)
    with use_language("zh"):
        built_zh = solve(ex, backward=backward)
    with use_language("en"):
        built_en = solve(ex, backward=backward)
        assert render_markdown(built_zh) == render_markdown(built_en)
        assert dumps(built_zh) == dumps(built_en)
    with use_language("zh"):  # and the other way round
        assert render_markdown(built_en) == render_markdown(built_zh)
        assert "Scores" not in render_markdown(built_en)


def test_a_diagnosis_made_in_chinese_is_named_in_english():
    ex = _by_id("single-head-3x4")
    sol = solve(ex)
    scaled = np.array(sol.step("scaled", 0).value)
    columns = (np.exp(scaled) / np.exp(scaled).sum(axis=0)).tolist()  # the softmax taken down each column
    with use_language("zh"):
        made_zh = diagnose(sol, "weights", 0, columns, tolerance=1e-6)
    made_en = diagnose(sol, "weights", 0, columns, tolerance=1e-6)
    assert made_zh and [str(d.message) for d in made_zh] == [str(d.message) for d in made_en]
    assert all(not any("\u4e00" <= c <= "\u9fff" for c in str(d.message)) for d in made_zh)
