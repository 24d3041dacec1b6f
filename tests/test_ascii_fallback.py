"""The ASCII fallback (tutor/base/ascii.py) spells every character a learner's text uses.

A stream that cannot encode the notation (``PYTHONIOENCODING=ascii``) gets it in ASCII; a character
the fallback did not know came out as a ``\\u`` escape (``R(m\\u03b8)^T``, ``\\xa73.2.2``: the trial of
issue 23/24). These tests scan the catalogs and the steps' formulas for characters and hold that each
one is spelled in ASCII, never escaped.
"""

from __future__ import annotations

import ast
import unicodedata
from pathlib import Path

import pytest

from tutor.base.ascii import asciify
from tutor.base.catalogs.en import EN
from tutor.base.catalogs.zh import ZH

TUTOR = Path(__file__).resolve().parents[1] / "tutor"
# The modules whose strings become the text of explain, practice, drills and check (formulas, worked lines).
FORMULA_PACKAGES = ("steps", "exact", "drills", "flash", "production", "mistakes", "audit")


def _wide(ch: str) -> bool:
    """A Han character or full-width form: Chinese text, which an ASCII stream never gets (--lang zh on an
    ASCII stream speaks English, tests/test_language.py)."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _catalog_chars(catalog: dict[str, str], *, skip_wide: bool) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, text in catalog.items():
        for ch in text:
            if not ch.isascii() and not (skip_wide and _wide(ch)):
                found.setdefault(ch, key)
    return found


def _source_chars() -> dict[str, str]:
    """The non-ASCII characters of the string constants (not docstrings) in the formula packages."""
    found: dict[str, str] = {}
    for package in FORMULA_PACKAGES:
        for path in sorted((TUTOR / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                    for ch in node.value:
                        if not ch.isascii() and not _wide(ch) and ch != "\ufeff":  # a CSV's byte-order mark
                            found.setdefault(ch, f"{path.relative_to(TUTOR)}")
    return found


def _escaped(chars: dict[str, str]) -> list[str]:
    return [f"{ch!r} {unicodedata.name(ch, '?')} ({where}) -> {asciify(ch)!r}"
            for ch, where in sorted(chars.items()) if not asciify(ch).isascii() or "\\" in asciify(ch)]


def test_every_character_of_the_english_catalog_is_spelled_in_ascii():
    assert _escaped(_catalog_chars(EN, skip_wide=False)) == []


def test_every_non_chinese_character_of_the_chinese_catalog_is_spelled_in_ascii():
    assert _escaped(_catalog_chars(ZH, skip_wide=True)) == []


def test_every_character_of_the_formulas_is_spelled_in_ascii():
    chars = _source_chars()
    assert "θ" in chars and "²" in chars  # the scan sees RoPE's angle and the norms' squares
    assert _escaped(chars) == []


@pytest.mark.parametrize(("text", "ascii"), [
    ("d_Q = R(mθ)ᵀ·d_Q_rot", "d_Q = R(m*theta)^T*d_Q_rot"),
    ("(RoFormer, Su et al. 2021, §3.2.2)", "(RoFormer, Su et al. 2021, sec. 3.2.2)"),
    ("m·θ_0 = 1·1 = 1", "m*theta_0 = 1*1 = 1"),
    ("√(mean(x²) + ε)", "sqrt(mean(x^2) + eps)"),  # NFKD alone wrote x² as x2
    ("⌈n / block_size⌉", "ceil(n / block_size)"),
    ("beyond ±1000", "beyond +/-1000"),
])
def test_spellings(text, ascii):
    assert asciify(text) == ascii


def test_explain_backward_with_rope_on_an_ascii_stream_has_no_escapes(cli_process):
    """The trial's command: no ``\\u03b8`` or ``\\xa7`` in the output, and theta spelled out."""
    r = cli_process("explain", "rope-relative-4x2", "--backward", env={"PYTHONIOENCODING": "ascii", "COLUMNS": "100"})
    assert r.code == 0, r.stderr
    out = r.stdout.decode("ascii")
    assert "\\u" not in out and "\\x" not in out
    assert "R(m*theta)^T*d_Q_rot" in out and "sec. 3.2.2" in out
