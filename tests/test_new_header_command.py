"""The command a generated exercise's first comment names writes that file again, byte for byte.

Each case runs ``attn-tutor new`` with some options, reads the command out of the file's first comment
(``Written by `attn-tutor new ...```, in Chinese ``由 `attn-tutor new ...` 生成``), runs it (split as a
shell would, with ``-o`` to another file) and compares the two files' bytes.
"""

from __future__ import annotations

import re
import shlex

import pytest

CASES = [
    ["--seed", "7"],
    ["--seed", "7", "--id", "my-ex"],
    ["--seed", "7", "--title", "My own title: it's mine"],
    ["--seed", "7", "--title", "two  spaces, one line"],
    ["--lang", "zh", "--seed", "7"],
    ["--lang", "zh", "--seed", "7", "--id", "my-ex", "--title", "我的练习"],
    ["--seed", "3", "--tokens", "2", "--d-model", "3", "--heads", "2", "--d-k", "1", "--mask", "causal",
     "--difficulty", "2", "--allow-dull", "--id", "two-heads"],
    ["--seed", "5", "--cross", "2", "--mask", "padding"],
    ["--seed", "5", "--heads", "2", "--kv-heads", "1", "--cache", "2", "--title", "A decode step"],
    ["--seed", "5", "--alibi", "--heads", "2", "--d-k", "1"],
    ["--seed", "5", "--rope", "half", "--id", "roped"],
    ["--seed", "5", "--norm", "rmsnorm", "--residual"],
    ["--seed", "5", "--norm", "layernorm", "--norm-placement", "post", "--residual"],
    ["--seed", "5", "--mla", "1", "--heads", "2", "--d-k", "1"],
    ["--seed", "5", "--window", "2", "--sinks", "1", "--tokens", "4"],
    ["--like", "single-head-3x4", "--seed", "9"],
    ["--like", "single-head-3x4", "--seed", "9", "--id", "mine", "--title", "Mine, not yours"],
    ["--lang", "zh", "--like", "single-head-3x4", "--seed", "9", "--id", "mine"],
    ["--like", "single-head-3x4", "--seed", "9", "--student", "Ana López"],
    ["--lang", "zh", "--like", "causal-left-padding-4x2", "--seed", "2", "--allow-dull", "--student", "王芳"],
]


def _header_command(text: str) -> list[str]:
    """The argv of the command the file's first comment names (without ``attn-tutor``)."""
    found = re.match(r"# (?:Written by|由) `(attn-tutor new .*)`", text.splitlines()[0])
    assert found, text.splitlines()[0]
    argv = shlex.split(found[1])
    assert argv[:2] == ["attn-tutor", "new"]
    return argv[1:]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_the_header_command_writes_the_same_file_again(cli, tmp_path, args):
    first, again = tmp_path / "first.yaml", tmp_path / "again.yaml"
    lang = args[:2] if args[:1] == ["--lang"] else []
    code, _, err = cli(*lang, "new", *args[len(lang):], "-o", first)
    assert code == 0, err
    argv = _header_command(first.read_text(encoding="utf-8"))
    code, _, err = cli(*argv, "-o", again)
    assert code == 0, err
    assert again.read_bytes() == first.read_bytes(), argv
