"""The one environment object (issue 19, item 4): what :class:`tutor.base.env.Env` reads, that the
library reads nothing else of the process's environment, and that a run speaks, prints and stores as
its Env says."""

from __future__ import annotations

import ast
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from tutor.base.env import MAX_WIDTH, MIN_WIDTH, Env, UnknownLanguage, clamp_width
from tutor.base.messages import CATALOGS, EN, language, t, use_language
from tutor.render.console import make_console

from .conftest import REPO


def env(terminal_width: int = 0, **variables: str) -> Env:
    return Env.from_environ(variables, stdin=None, stdout=None, stderr=None, terminal_width=terminal_width)


# --- what it reads ----------------------------------------------------------------------------------


def test_every_variable_it_reads(tmp_path):
    e = env(ATTN_TUTOR_HOME="~/progress", ATTN_TUTOR_LANG="en", ATTN_TUTOR_PATH=os.pathsep.join(["a", " ", "b/c"]),
            ATTN_TUTOR_DEBUG="1", COLUMNS="80", TERMINAL_WIDTH="30", NO_COLOR="1", FORCE_COLOR="1", TERM="dumb")
    assert (e.home, e.language, e.packs) == (Path.home() / "progress", "en", (Path("a"), Path("b/c")))
    assert (e.width, e.help_width, e.no_color, e.force_terminal, e.debug) == (80, 30, True, True, True)
    assert e.environ["TERM"] == "dumb"  # kept for rich, which reads it itself
    with pytest.raises(TypeError):
        e.environ["TERM"] = "xterm"  # type: ignore[index]  # read-only


def test_nothing_set_is_english_no_packs_the_terminal_and_the_platform_folder():
    e = env()
    assert (e.home, e.language, e.packs, e.width, e.help_width) == (None, "en", (), None, None)
    assert (e.no_color, e.force_terminal, e.debug) == (False, None, False)
    import platformdirs

    assert e.data_dir() == Path(platformdirs.user_data_dir("attn-tutor", appauthor=False))
    assert env(ATTN_TUTOR_HOME="/somewhere").data_dir() == Path("/somewhere")


def test_a_language_without_a_catalogue_is_refused_when_asked_for_and_when_given():
    with pytest.raises(UnknownLanguage, match=r"unknown language 'xx' \(ATTN_TUTOR_LANG\); attn-tutor speaks: en, zh"):
        env(ATTN_TUTOR_LANG="xx")
    with pytest.raises(ValueError, match="no message catalogue for language 'xx'"):
        Env(home=None, language="xx")


@pytest.mark.parametrize(("variables", "language"), [
    ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW"}, "zh"),
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),  # LC_MESSAGES before LANG
    ({"LC_ALL": "en_US.UTF-8", "LC_MESSAGES": "zh_CN.UTF-8"}, "en"),  # LC_ALL before both
    ({"LC_ALL": "", "LANG": "zh_CN"}, "zh"),  # an empty one is not set
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),  # C is no language: English
    ({"LANG": "fr_FR.UTF-8"}, "en"),  # a locale attn-tutor does not speak is English, not an error
    ({"ATTN_TUTOR_LANG": "zh", "LANG": "en_US"}, "zh"),  # ATTN_TUTOR_LANG before the locale
    ({"ATTN_TUTOR_LANG": "en", "LC_ALL": "zh_CN.UTF-8"}, "en"),
    ({"ATTN_TUTOR_LANG": "zh-Hans"}, "zh"),
    ({"ATTN_TUTOR_LANG": "ZH_cn.utf8"}, "zh"),
    ({"ATTN_TUTOR_LANG": " ", "LANG": "zh_CN"}, "zh"),  # blank: not set
])
def test_the_language_is_attn_tutor_lang_then_the_locale_then_english(variables, language):
    assert env(**variables).language == language


@pytest.mark.parametrize(("value", "width"), [
    ("0", MIN_WIDTH), ("19", MIN_WIDTH), ("80", 80), (str(MAX_WIDTH + 1), MAX_WIDTH), ("1000000", MAX_WIDTH),
    ("9" * 5000, MAX_WIDTH), ("0" * 5000 + "30", 30), (" 100 ", 100), ("wide", None), ("", None),
    ("\u0661\u0660\u0660", None), (None, None),
])
def test_widths_are_clamped_to_the_layouts(value, width):
    assert clamp_width(value) == width
    variables = {} if value is None else {"COLUMNS": value, "TERMINAL_WIDTH": value}
    e = env(**variables)
    assert (e.width, e.help_width) == (width, width)
    if width is not None:  # what rich reads again when it measures a console: the clamped width
        assert (e.environ["COLUMNS"], e.environ["TERMINAL_WIDTH"]) == (str(width), str(width))


def test_a_terminal_wider_than_the_widest_layout_is_laid_out_at_it_without_columns():
    assert env(terminal_width=3000).width == MAX_WIDTH
    assert env(terminal_width=300).width is None  # the terminal's own, as rich measures it
    assert env(terminal_width=3000, COLUMNS="80").width == 80
    assert env(terminal_width=3000, COLUMNS="wide").width is None  # COLUMNS set: rich ignores it, a console clamps


@pytest.mark.parametrize("variables", [
    {}, {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"},
    {"TTY_COMPATIBLE": "1", "FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "yes", "FORCE_COLOR": "1"},
])
def test_force_terminal_is_what_rich_makes_of_the_same_variables(variables):
    rich = Console(file=io.StringIO(), _environ=variables).is_terminal  # rich, the oracle (a StringIO is no tty)
    forced = env(**variables).force_terminal
    assert (forced if forced is not None else False) == rich


def test_from_process_reads_this_process(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "77")
    monkeypatch.setenv("ATTN_TUTOR_HOME", str(tmp_path))
    e = Env.from_process()
    assert (e.width, e.home) == (77, tmp_path)
    assert (e.stdin, e.stdout, e.stderr) == (os.sys.stdin, os.sys.stdout, os.sys.stderr)


# --- nothing else reads it ----------------------------------------------------------------------------


def environment_reads(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that read or change the process's environment (``os.environ``, ``os.getenv`` ...)."""
    names = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
    found = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr in names and isinstance(node.value, ast.Name)
             and node.value.id == "os"]
    found += [node.lineno for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & names]
    return found


def test_only_the_env_reads_the_process_environment():
    readers = {str(path.relative_to(REPO)): lines for path in sorted((REPO / "tutor").rglob("*.py"))
               if (lines := environment_reads(ast.parse(path.read_text(encoding="utf-8"))))}
    assert list(readers) == ["tutor/base/env.py"]
    assert len(readers["tutor/base/env.py"]) == 1  # Env.from_process
    assert environment_reads(ast.parse("import os\nos.environ.get('X')\nfrom os import getenv\n")) == [2, 3]


def test_t_reads_the_language_of_the_run_not_the_environment(monkeypatch):
    monkeypatch.setitem(CATALOGS, "xx", {"cli.help": "XX"})
    monkeypatch.setenv("ATTN_TUTOR_LANG", "xx")
    assert (language(), t("cli.help")) == ("en", EN["cli.help"])
    with use_language("xx"):
        assert (language(), t("cli.help"), t("cli.list.help")) == ("xx", "XX", EN["cli.list.help"])  # English fallback
    assert language() == "en"
    with pytest.raises(ValueError):
        with use_language("yy"):
            pass


def test_a_run_speaks_the_language_of_its_env(cli, monkeypatch):
    monkeypatch.setitem(CATALOGS, "xx", {"cli.error": "XX {message}"})
    assert cli("explain", "nope", env={"ATTN_TUTOR_LANG": "xx"}).err.startswith("XX no exercise 'nope'")
    assert cli("explain", "nope").err.startswith("error: no exercise 'nope'")
    assert language() == "en"  # only for the run


def test_a_console_is_of_its_env_not_of_the_process(monkeypatch):
    monkeypatch.setenv("COLUMNS", "33")
    monkeypatch.setenv("FORCE_COLOR", "1")
    plain = make_console(env(COLUMNS="70", NO_COLOR="1"), file=io.StringIO())
    assert (plain.width, plain.no_color, plain.is_terminal) == (70, True, False)
    coloured = make_console(env(COLUMNS="50", FORCE_COLOR="1", TERM="xterm-256color"), file=io.StringIO())
    assert (coloured.width, coloured.is_terminal, coloured.color_system) == (50, True, "256")
    recording = make_console(None, file=io.StringIO(), record=True, width=40)
    assert (recording.width, recording.is_terminal, recording.no_color) == (40, False, False)


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_a_run_in_this_process_reads_its_env_and_leaves_the_environment_alone(cli, home, tmp_path, monkeypatch):
    for name, value in (("COLUMNS", "30"), ("TERMINAL_WIDTH", "30"), ("FORCE_COLOR", "1"),
                        ("ATTN_TUTOR_HOME", str(tmp_path / "elsewhere")), ("ATTN_TUTOR_PATH", str(tmp_path / "none"))):
        monkeypatch.setenv(name, value)
    before = dict(os.environ)
    code, out, err = cli("list")
    assert (code, err) == (0, "") and widest(out) > 30 and "\x1b[" not in out  # 100 columns, no colour
    assert widest(cli("--help", env={"COLUMNS": "60"}).out) == 60  # typer's help too
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 1; 2 2; 2 2\n")
    assert (code, err) == (0, "")
    assert (home / "progress.sqlite3").exists() and not (tmp_path / "elsewhere").exists()
    assert dict(os.environ) == before
