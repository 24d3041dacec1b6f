"""Meta-tests of the command line (sqlite-utils' ``test_docs.py`` idea): every command is registered on the app,
listed by ``--help`` in order with its help, documented in the README; and no import in ``tutor/`` runs in a
circle back into ``tutor.cli`` (its command modules once imported it, and a command was lost that way)."""

from __future__ import annotations

import re

import pytest
import typer

from tutor.base.messages import t
from tutor.cli import COMMANDS, app

from .conftest import REPO
from .test_structure import import_graph

NAMES = [name for name, _, _ in COMMANDS]


def test_every_command_is_registered_in_the_order_of_help():
    """Commands, then groups of subcommands (``drill``), each registered once, in the order of COMMANDS."""
    registered = [(c.name, c.callback) for c in app.registered_commands]
    registered += [(g.name, g.typer_instance) for g in app.registered_groups]
    assert registered == [(n, f) for n, f, _ in COMMANDS]
    assert list(typer.main.get_command(app).commands) == NAMES  # type: ignore[attr-defined]
    assert len(set(NAMES)) == len(NAMES) == 12


def _flat(text: str) -> str:
    """Help text without rich's box characters and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_help_lists_every_command_with_its_help_in_order(cli):
    result = cli("--help")
    assert result.code == 0, result.err
    listed = re.findall(r"^│ ([a-z]+) {2,}", result.out, re.M)
    assert listed == NAMES
    flat = _flat(result.out)
    for name, _, help_key in COMMANDS:
        assert f"{name} {t(help_key)}" in flat


@pytest.mark.parametrize(("name", "help_key"), [(n, k) for n, _, k in COMMANDS])
def test_every_command_has_its_own_help(cli, name, help_key):
    result = cli(name, "--help")
    assert result.code == 0, result.err
    assert result.out.lstrip().startswith("Usage: attn-tutor " + name)
    assert t(help_key) in _flat(result.out)


def test_every_command_is_documented_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    documented = {m for block in blocks for m in re.findall(r"^attn-tutor ([a-z]+)", block, re.M)}
    assert documented == set(NAMES)  # a command in the README but not registered, or registered but undocumented


# --- the command modules import nothing from the package that registers them ---------------------------


def test_command_modules_import_nothing_from_the_cli_package():
    """The cycle that once lost a command: a command module importing ``app`` back from ``tutor.cli``
    (the package-wide no-cycle test is in ``test_structure.py``)."""
    edges = import_graph()
    assert "tutor.cli.common" in edges["tutor.cli.explain"] and "tutor.cli.explain" in edges["tutor.cli"]
    for module in ("explain", "practice", "check", "author", "drill", "common", "streams"):
        assert "tutor.cli" not in edges[f"tutor.cli.{module}"], module


# --- start-up: a run builds only the command it runs (issue 19, item 7) ---------------------------------


def test_a_run_builds_only_the_command_it_runs(cli, monkeypatch):
    import tutor.cli

    built: list[str] = []
    real = tutor.cli._build
    monkeypatch.setattr(tutor.cli, "_build", lambda name: built.append(name) or real(name))
    assert cli("--help").code == 0 and built == []  # the list of commands needs none of them built
    assert cli("schema").code == 0 and built == ["schema"]
    assert cli("drill", "shapes", "--help").code == 0 and built == ["schema", "drill"]
