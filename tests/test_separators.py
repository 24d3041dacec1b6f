"""Line and paragraph separators are shown escaped, like control characters (issue 8, second round, item c).

``str.splitlines`` breaks at U+2028, U+2029, U+0085, the vertical tab, the form feed and U+001C..U+001E, so
an error quoting such text was cut into several ``error:`` lines (and JSON errors) at the character,
which was acted on instead of shown.  Every character :mod:`tutor.base.textsafe` escapes is escaped wherever
text from a file or the command line is shown; only a real newline starts a new line.
"""

from __future__ import annotations

import json

import pytest

from tutor.base.textsafe import is_unsafe, lines, shown

#: Every character ``str.splitlines`` breaks at besides "\n" and "\r".
SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
ESCAPED = {ch: ch.encode("unicode_escape").decode() for ch in SEPARATORS}  # "\\u2028", "\\x85", ...


def test_the_separators_are_the_ones_splitlines_breaks_at():
    found = [ch for ch in map(chr, range(0x3000)) if len(f"a{ch}b".splitlines()) == 2 and ch not in "\n\r"]
    assert sorted(found) == sorted(SEPARATORS)


@pytest.mark.parametrize("ch", SEPARATORS, ids=ESCAPED.get)
def test_shown_escapes_each_and_lines_does_not_break_at_it(ch):
    assert is_unsafe(ch)
    assert shown(f"a{ch}b") == f"a{ESCAPED[ch]}b"
    assert lines(f"a{ch}b\nc\n") == [f"a{ch}b", "c"]


@pytest.mark.parametrize("ch", SEPARATORS, ids=ESCAPED.get)
def test_an_error_quoting_a_separator_is_one_line_with_it_escaped(cli, ch):
    code, out, err = cli("explain", f"no{ch}such-id")
    assert (code, out) == (2, "")
    assert err == (f"error: no exercise 'no{ESCAPED[ch]}such-id': not a bundled id, nor a file "
                   "(run `attn-tutor list` to see the ids)\n")


@pytest.mark.parametrize("ch", ["\u2028", "\u0085"], ids=ESCAPED.get)
def test_the_json_error_document_has_one_error_for_it(cli, ch):
    code, out, err = cli("explain", f"no{ch}such-id", "--format", "json")
    doc = json.loads(out)
    assert code == 2 and len(doc["errors"]) == 1 and len(err.splitlines()) == 1
    assert doc["errors"][0]["text"] == f"no exercise 'no{ESCAPED[ch]}such-id': not a bundled id, nor a file " \
                                       "(run `attn-tutor list` to see the ids)"


def test_a_usage_error_quoting_a_separator_is_one_line(cli):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q\u2028k")
    assert code == 2
    assert err.splitlines()[0] == ("error: invalid value for --steps: unknown step 'q\\u2028k'; the steps are x_norm, c_kv, q, k_new, v_new, k, v, q_rot, k_rot, scores, q_absorbed, scores_absorbed, scaled, biased, masked, weights, head_output, concat, output, residual, out_norm, d_output, d_concat, d_w_o, d_b_o, d_head_output, d_weights, d_scaled, d_v, d_q_rot, d_q, d_k_rot, d_k, d_w_q, d_w_k, d_w_v, d_b_q, d_b_k, d_b_v, d_x, d_x_kv")
    assert len(err.split("\n")) == 3  # the error line, the try line, the final newline


@pytest.fixture
def separated(tmp_path):
    text = "".join(f"{i}{ch}" for i, ch in enumerate(SEPARATORS))  # "0\u20281\u20292\x85..."
    quoted = text.encode("unicode_escape").decode()
    (tmp_path / "sep.yaml").write_text(
        f'id: sep-test\ntitle: "Title {quoted} end"\ndescription: "Desc {quoted} end"\n'
        'tokens: ["a\\u2028b", "c\\x85d", "e"]\nx: [[1, 0], [0, 1], [1, 1]]\n'
        "heads:\n  - w_q: [[1, 0], [0, 1]]\n    w_k: [[1, 0], [0, 1]]\n    w_v: [[1, 0], [0, 1]]\n")
    (tmp_path / "sol.yaml").write_text(
        f'exercise: single-head-3x4\ntitle: "Sol {quoted} end"\nsource: "Src {quoted} end"\nq: [[1, 1], [2, 2], [2, 2]]\n')
    return tmp_path, "".join(f"{i}{ESCAPED[ch]}" for i, ch in enumerate(SEPARATORS))


@pytest.mark.parametrize("fmt", ["rich", "markdown", "html"])
def test_an_exercise_s_text_shows_them_escaped_in_every_format(cli, separated, fmt):
    folder, escaped = separated
    code, out, err = cli("explain", folder / "sep.yaml", "--format", fmt, env={"COLUMNS": "500"})
    assert (code, err) == (0, "")
    assert not any(ch in out for ch in SEPARATORS)
    if fmt == "markdown":  # a backslash may be written escaped ("\\\\u2028"); either way it reads "\\u2028"
        out = out.replace("\\\\", "\\")
    assert f"Title {escaped} end" in out and f"Desc {escaped} end" in out and "a\\u2028b" in out


def test_a_solution_s_title_and_source_show_them_escaped(cli, separated):
    folder, escaped = separated
    code, out, err = cli("check", folder / "sol.yaml", env={"COLUMNS": "500"})
    assert (code, err) == (0, "")
    assert not any(ch in out for ch in SEPARATORS)
    assert f"Sol {escaped} end" in out and f"Src {escaped} end" in out


@pytest.mark.parametrize("title", ["a\u2028b", "a\u0085b", "a\nb", "a\tb", "a\u2029 b"])
def test_new_title_line_breaks_are_whitespace_collapsed(cli, title):
    code, out, err = cli("new", "--id", "t1", "--title", title)
    assert code == 0 and '\ntitle: "a b"\n' in out


@pytest.mark.parametrize("title, named", [
    ("bad\x1btitle", "U+001B (a control character)"),
    ("a\u200bb", "U+200B ZERO WIDTH SPACE"),
    ("a\u202eb", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("a\u00adb", "U+00AD SOFT HYPHEN"),
])
def test_new_title_with_a_character_a_terminal_acts_on_is_refused_by_name(cli, tmp_path, title, named):
    code, out, err = cli("new", "--title", title, "-o", tmp_path / "new.yaml")
    assert code == 2 and not (tmp_path / "new.yaml").exists()
    assert err.splitlines()[0] == (f"error: invalid value for --title: the title may not contain {named}: "
                                   "a terminal acts on such a character or hides it")


def test_new_title_with_an_undecodable_byte_is_refused_not_a_crash(cli_process, tmp_path):
    """``--title $'a\\x85b'`` in a UTF-8 locale: Python keeps the byte as U+DC85; writing it crashed."""
    done = cli_process("new", "--title", "a\udc85b", "-o", tmp_path / "new.yaml")
    assert done.code == 2 and not (tmp_path / "new.yaml").exists()
    assert done.err.splitlines()[0] == ("error: invalid value for --title: the title has the byte 0x85, "
                                        "which is not text in the locale's encoding")
