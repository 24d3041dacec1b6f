"""``attn-tutor code`` in Chinese: nothing a learner reads is left in English.

What a kata says comes from the catalogue (a case's ``given`` words are
:class:`tutor.katas.kata.Phrase` keys; the rest is notation), the checker's
child process says what the parent hands it, and each kata file has a Chinese
twin (``numpy_start.zh.py`` beside ``numpy_start.py``): the same code with
its comments, docstrings and TODOs in Chinese, which ``code start`` and
``code show`` write in a Chinese run and which passes ``code check`` as its
English file does.
"""

from __future__ import annotations

import ast
import io
import json
import re
import string
import tokenize
from pathlib import Path

import pytest

from tutor.base.catalogs.en import EN
from tutor.base.catalogs.zh import ZH
from tutor.base.messages import CATALOGS, t, use_language
from tutor.exercise.catalog import resolve_id
from tutor.katas import catalog, harness
from tutor.katas.kata import Phrase

from .oracle import require_torch

REPO = Path(__file__).resolve().parent.parent
FILES = REPO / "tutor" / "katas" / "files"
ENGLISH_FILES = sorted(p for p in FILES.glob("*/*.py") if p.name.count(".") == 1)
SOLUTIONS = [p for p in ENGLISH_FILES if p.stem.endswith("_solution")]
CHINESE = re.compile(r"[\u4e00-\u9fff]")
CASES = [(k, c) for k in catalog.katas() for c in k.cases()]


def _zh(path: Path) -> Path:
    return path.with_name(f"{path.stem}.zh.py")


# --- what a case is given ----------------------------------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LITERALS = {"True", "False", "None"}


def english_words(text: str) -> list[str]:
    """The English words in ``text``: a run of 3 or more letters, lower case after the first, that is no
    identifier (no ``_`` or digit), no acronym (``MQA``), no Python literal, no keyword argument (``dropout=``),
    no attribute or call (``.eval()``)."""
    found = []
    for m in _TOKEN.finditer(text):
        word, before, after = m.group(), text[:m.start()], text[m.end():].lstrip()
        if (re.fullmatch(r"[A-Za-z][a-z]{2,}", word) and word not in _LITERALS
                and not before.endswith(".") and not after.startswith(("=", "("))):
            found.append(word)
    return found


@pytest.mark.parametrize("text", ["no mask", "the last block smaller", "biases", "key padding [B, 1, 1, L]",
                                  "w_o = I (the exercise has none)", "L_k = 7 in blocks of 3", "MQA layout"])
def test_english_words_are_found(text) -> None:
    assert english_words(text)


@pytest.mark.parametrize("text", ["float32", "L_q = 3, L_k = 5", "W_Q ≠ W_K", "MQA", "is_causal=True",
                                  "dropout=0.5, .eval()", "block_size 1", "d_v = 3 ≠ d_k = 4", "32 MiB",
                                  "mask_shape", "因果掩码 [L, L]"])
def test_notation_is_no_english(text) -> None:
    assert english_words(text) == []


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize(("kata", "case"), CASES, ids=[f"{k.id}/{c.id}" for k, c in CASES])
def test_every_given_item_is_a_catalogue_phrase_or_notation(kata, case) -> None:
    """A new English phrase in a case's ``given`` fails here: words go in the catalogue (``phrase(key)``)."""
    for item in case.given:
        if isinstance(item, Phrase):
            key = f"code.given.{item.key}"
            assert key in EN and key in ZH, f"{kata.id}/{case.id}: {key} is in neither catalogue"
            assert _fields(EN[key]) == set(item.fields), f"{kata.id}/{case.id}: {key} takes {_fields(EN[key])}"
            with use_language("zh"):
                said = t(key, **item.fields)
            assert CHINESE.search(said) and not english_words(said), f"{key} in Chinese: {said!r}"
        elif item.startswith("exercise:"):
            resolve_id(item.removeprefix("exercise:"))  # a bundled exercise: raises if there is none
        else:
            assert not english_words(item), (f"{kata.id}/{case.id}: {item!r} has English words "
                                             f"{english_words(item)}: make it a phrase(\"...\") of code.given.*")


def test_the_code_keys_of_both_catalogues_agree() -> None:
    """Every ``code.`` key in both catalogues, with the same ``{fields}`` (Chinese: only ``.other`` forms)."""
    en = {k for k in EN if k.startswith("code.")}
    zh = {k for k in ZH if k.startswith("code.")}
    assert zh == {k for k in en if not k.endswith(".one")}
    assert [k for k in zh if _fields(EN[k]) != _fields(ZH[k])] == []


def test_the_checkers_own_sentences_are_the_catalogues() -> None:
    """The child process cannot read the catalogue: its English fallbacks are the catalogue's words."""
    assert {f"code.harness.{name}" for name in harness.MESSAGES} == {k for k in EN if k.startswith("code.harness.")}
    assert all(EN[f"code.harness.{name}"] == said for name, said in harness.MESSAGES.items())


def test_a_failing_check_in_chinese_says_the_cases_in_chinese(cli) -> None:
    bug = REPO / "tests" / "kata_files" / "masks" / "mask_or.py"
    r = cli("code", "check", bug, "--kata", "masks", "--lang", "zh")
    assert r.code == 1, r.err
    cases = [line for line in r.out.splitlines() if line.lstrip().startswith(("✓", "✗"))]
    assert len(cases) == len(catalog.get("masks").cases()) and all(CHINESE.search(line) for line in cases)
    doc = json.loads(cli("code", "check", bug, "--kata", "masks", "--lang", "zh", "--format", "json").out)
    given = {c["id"]: c["given"] for c in doc["cases"]}
    assert given["causal-padded"] == ["is_causal=True", "右填充和左填充"]
    # JSON keeps the bundled exercise a case's numbers come from as its id, ``exercise:ID``
    assert not [g for gs in given.values() for g in gs if english_words(g) and not g.startswith("exercise:")]
    english = json.loads(cli("code", "check", bug, "--kata", "masks", "--format", "json").out)
    assert {c["id"]: c["given"] for c in english["cases"]}["causal-padded"] == ["is_causal=True", "right and left padding"]


def test_autograd_switched_off_says_so_in_the_language_of_the_run(cli, tmp_path) -> None:
    require_torch()
    f = tmp_path / "by_autograd.py"
    f.write_text("import torch\nKATA = 'backward'\n\n\ndef attention_backward(q, k, v, d_out, mask=None):\n"
                 "    torch.autograd.grad(q.sum(), q)\n", encoding="utf-8")
    r = cli("code", "check", f, "--lang", "zh", "--format", "json")
    assert {c["exception"] for c in json.loads(r.out)["cases"]} == {f"RuntimeError: {ZH['code.harness.autograd_off']}"}
    r = cli("code", "check", f, "--format", "json")
    assert {c["exception"] for c in json.loads(r.out)["cases"]} == {f"RuntimeError: {EN['code.harness.autograd_off']}"}


def test_a_chinese_pass_asks_the_follow_ups_in_chinese(cli) -> None:
    r = cli("code", "check", FILES / "mha" / "numpy_solution.py", "--lang", "zh")
    assert r.code == 0, r.out + r.err
    lines = r.out.split(ZH["code.follow_ups"])[1].strip("\n").splitlines()
    assert lines and lines[0].startswith("  - ") and all(line.startswith(("  - ", "    ")) for line in lines)
    asked = "\n".join(lines).split("  - ")[1:]  # a question wrapped to the width goes on under its dash
    assert asked and all(CHINESE.search(question) for question in asked)


def test_chinese_lines_fit_the_terminal(cli) -> None:
    """A Chinese character takes two columns: a report's sentences break between characters to fit."""
    from rich.cells import cell_len

    r = cli("code", "check", "d_k_order.py", "--lang", "zh", env={"COLUMNS": "60"},
            cwd=REPO / "tests" / "kata_files" / "backward")  # a short name: a path is one word, never broken
    assert r.code == 1, r.err
    lines = [line for line in r.out.splitlines() if CHINESE.search(line)]
    assert len(lines) > 5 and max(cell_len(line) for line in lines) <= 60, r.out


# --- the kata files -----------------------------------------------------------------------------------------


def _without_docstrings(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _code_tokens(text: str) -> list[tuple[int, str, int]]:
    """The file's tokens but its comments and blank lines, each with its column; a docstring as ``\"\"\"``."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL):
            continue
        docstring = tok.type == tokenize.STRING and tok.string.startswith('"""')
        column = 0 if tok.type == tokenize.NEWLINE else tok.start[1]  # a line's end: after its comment
        out.append((tok.type, '"""' if docstring else tok.string, column))
    return out


def _words(text: str) -> str:
    """The comments and docstrings of a file."""
    return "\n".join(tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                     if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.startswith('"""')))


@pytest.mark.parametrize("path", ENGLISH_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_kata_file_has_a_chinese_twin_with_the_same_code(path) -> None:
    zh = _zh(path)
    assert zh.is_file(), f"{zh.relative_to(REPO)} is missing"
    english, chinese = path.read_text(encoding="utf-8"), zh.read_text(encoding="utf-8")
    assert _without_docstrings(chinese) == _without_docstrings(english)
    assert _code_tokens(chinese) == _code_tokens(english), "the code differs, not only its comments"
    assert CHINESE.search(_words(chinese)), "no Chinese in its comments and docstrings"


def test_no_chinese_file_without_an_english_one() -> None:
    assert sorted(FILES.glob("*/*.zh.py")) == sorted(_zh(p) for p in ENGLISH_FILES)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name + "/" + p.stem)
def test_each_chinese_solution_passes(cli, path) -> None:
    r = cli("code", "check", _zh(path), "--lang", "zh", "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 0, r.out + r.err
    assert doc["passed"] is True and doc["kata"] == path.parent.name and doc["flavour"] == path.stem.split("_")[0]


@pytest.mark.parametrize("torch", [False, True])
def test_start_and_show_write_the_file_of_the_language(cli, tmp_path, torch) -> None:
    flavour, flag = ("torch", ["--torch"]) if torch else ("numpy", [])
    assert cli("code", "start", "sdpa", *flag, "-o", tmp_path / "zh.py", "--lang", "zh").code == 0
    assert cli("code", "start", "sdpa", *flag, "-o", tmp_path / "en.py").code == 0
    assert (tmp_path / "zh.py").read_text(encoding="utf-8") == (FILES / "sdpa" / f"{flavour}_start.zh.py").read_text(encoding="utf-8")
    assert (tmp_path / "en.py").read_text(encoding="utf-8") == (FILES / "sdpa" / f"{flavour}_start.py").read_text(encoding="utf-8")
    shown = cli("code", "show", "sdpa", *flag, "--force", "--lang", "zh").out
    assert shown.rstrip("\n") == (FILES / "sdpa" / f"{flavour}_solution.zh.py").read_text(encoding="utf-8").rstrip("\n")


def test_a_language_with_no_file_of_its_own_gets_the_english_one(monkeypatch) -> None:
    from tutor.cli.code import _file

    monkeypatch.setitem(CATALOGS, "xx", dict(EN))
    with use_language("xx"):
        assert _file(catalog.get("mha"), False, "start") == FILES / "mha" / "numpy_start.py"
    with use_language("zh"):
        assert _file(catalog.get("mha"), True, "solution") == FILES / "mha" / "torch_solution.zh.py"
