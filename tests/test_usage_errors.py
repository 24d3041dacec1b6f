"""Usage errors read as every error reads (issue 8, second round, item b).

An unknown option, a missing argument, a missing or bad option value: one ``error: ...`` line and one
``try 'attn-tutor COMMAND --help'`` line on stderr, exit code 2, nothing on stdout (a JSON document with
``--format json``), as the README promises ("one `error:` line per problem on stderr").  Typer printed a
usage line, a "Try ..." line and a boxed panel in box-drawing characters instead.  The cases are built
from the commands' own parameters, so a new command or option is covered without a new test.
"""

from __future__ import annotations

import json

import pytest
import typer.main

from tutor.cli import COMMANDS, app

ROOT = typer.main.get_command(app)
NAMES = [name for name, _, _ in COMMANDS]


def required_args(name: str) -> list[str]:
    """Values for a command's required arguments, so that only the error under test is made."""
    fill = {"exercise": "single-head-3x4", "solution": "sol.yaml", "paths": "exercises"}
    return [fill[p.name] for p in ROOT.commands[name].params if p.param_type_name == "argument" and p.required]


def value_options(name: str) -> list[str]:
    """The options of a command that take a value (not flags)."""
    return [p.opts[-1] for p in ROOT.commands[name].params
            if p.param_type_name == "option" and not getattr(p, "is_flag", False) and not getattr(p, "count", False)]


CASES = (
    [pytest.param([name, *required_args(name), "--no-such-option"], name, "no such option: --no-such-option",
                  id=f"{name} unknown option") for name in NAMES]
    + [pytest.param([name], name, f"missing argument '{p.name}'", id=f"{name} missing argument")
       for name in NAMES for p in ROOT.commands[name].params if p.param_type_name == "argument" and p.required]
    + [pytest.param([name, *required_args(name), option], name, f"option '{option}' requires an argument",
                    id=f"{name} {option} without a value") for name in NAMES for option in value_options(name)]
    + [pytest.param([name, *required_args(name), "--format", "xml"], name, "invalid value for '--format'",
                    id=f"{name} --format xml") for name in NAMES if "--format" in value_options(name)]
    + [pytest.param(args, args[0], message, id=" ".join(args)) for args, message in [
        (["explain", "single-head-3x4", "--precision", "abc"], "invalid value for '--precision'"),
        (["explain", "single-head-3x4", "--head", "7"], "invalid value for --head: there is no head 7"),
        (["practice", "single-head-3x4", "--tolerance", "much"], "invalid value for '--tolerance'"),
        (["new", "--tokens", "three"], "invalid value for '--tokens'"),
        (["schema", "extra"], "got unexpected extra argument(s) (extra)"),
        (["stats", "extra"], "got unexpected extra argument(s) (extra)"),
    ]]
)


@pytest.mark.parametrize("args, command, message", CASES)
def test_a_usage_error_is_one_error_line_and_a_try_line(cli, args, command, message):
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    first, second = err.splitlines()
    assert first.startswith("error: ") and message in first, err
    assert second == f"try 'attn-tutor {command} --help'"
    assert not any(ch in err for ch in "╭│╰─+|"), err  # no panel, in box drawing or its ASCII fallback


@pytest.mark.parametrize("args, message", [
    (["--no-such-option"], "error: no such option: --no-such-option"),
    (["nosuchcmd"], "error: no such command 'nosuchcmd'"),
])
def test_a_usage_error_of_attn_tutor_itself(cli, args, message):
    code, out, err = cli(*args)
    assert (code, out, err) == (2, "", f"{message}\ntry 'attn-tutor --help'\n")


def test_no_command_prints_the_help_and_one_error_line(cli):
    code, out, err = cli()
    assert code == 2 and "Usage: attn-tutor" in out
    assert err == "error: no command given\n"


@pytest.mark.parametrize("args", [["check", "--format", "json"], ["validate", "--format", "json", "--bogus"],
                                  ["stats", "--format", "json", "extra"]], ids=" ".join)
def test_with_format_json_the_usage_error_is_also_a_json_document(cli, args):
    code, out, err = cli(*args)
    doc = json.loads(out)
    assert code == 2 and doc["error"] == "usage" and doc["exit_code"] == 2
    assert [f"error: {e['text']}" for e in doc["errors"]] == err.splitlines()[:1]


def test_what_the_user_typed_reaches_the_terminal_escaped(cli):
    code, out, err = cli("\x1b]0;owned\x07")
    assert code == 2 and "\x1b" not in err and "\x07" not in err
    assert err.splitlines()[0] == "error: no such command '\\x1b]0;owned\\x07'"


def test_on_an_ascii_stream_in_a_process(cli_process):
    done = cli_process("explain", "--precision", env={"PYTHONIOENCODING": "ascii"})
    assert done.code == 2 and done.stdout == b""
    assert done.stderr == b"error: option '--precision' requires an argument\ntry 'attn-tutor explain --help'\n"
