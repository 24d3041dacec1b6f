"""``attn-tutor code``: list, start, check, show, as a learner uses them (issue 21).

The learner's files here are real programs run in a child process: the
reference solutions, held-back files with one bug each (``tests/kata_files``),
and small hostile ones (a syntax error, a hang, a print of control
characters, an exception at import).  Expected diagnoses are the mistakes the
files were written with, by hand.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tutor.katas import catalog

REPO = Path(__file__).resolve().parent.parent
FILES = REPO / "tutor" / "katas" / "files"
BUGGY = sorted((REPO / "tests" / "kata_files").glob("*/*.py"))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    f = tmp_path / name
    f.write_text(textwrap.dedent(text), encoding="utf-8")
    return f


def test_list_shows_every_kata_pending_then_done(cli, tmp_path) -> None:
    r = cli("code", "list", "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["katas"]
    assert [k["id"] for k in rows] == list(catalog.IDS)
    assert not any(k["done"] for k in rows)
    assert cli("code", "check", FILES / "mha" / "numpy_solution.py").code == 0
    rows = json.loads(cli("code", "list", "--format", "json").out)["katas"]
    assert [k["id"] for k in rows if k["done"]] == ["mha"]
    assert "done" in cli("code", "list").out


@pytest.mark.parametrize("kata", catalog.IDS)
@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_reference_solutions_pass(cli, kata, flavour) -> None:
    r = cli("code", "check", FILES / kata / f"{flavour}_solution.py", "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 0, r.out + r.err
    assert doc["passed"] is True and doc["kata"] == kata and doc["flavour"] == flavour
    assert doc["cases"] and all(c["passed"] for c in doc["cases"])
    assert doc["follow_ups"], "a pass is followed by the interviewer's questions"


@pytest.mark.parametrize("kata", catalog.IDS)
@pytest.mark.parametrize("torch", [False, True])
def test_start_writes_a_skeleton_that_runs_and_fails_every_case(cli, tmp_path, kata, torch) -> None:
    args = ["--torch"] if torch else []
    r = cli("code", "start", kata, *args, cwd=tmp_path)
    assert r.code == 0, r.err
    name = f"{kata.replace('-', '_')}{'_torch' if torch else ''}.py"
    assert (tmp_path / name).is_file() and name in r.out
    again = cli("code", "start", kata, *args, cwd=tmp_path)
    assert again.code == 2 and "--force" in again.err and len(again.err.strip().splitlines()) == 1
    assert cli("code", "start", kata, *args, "--force", cwd=tmp_path).code == 0
    doc = json.loads(cli("code", "check", tmp_path / name, "--format", "json").out)
    assert doc["flavour"] == ("torch" if torch else "numpy") and doc["kata"] == kata
    assert not doc["passed"] and all(c["problem"] == "exception" for c in doc["cases"])
    assert all("NotImplementedError" in c["exception"] for c in doc["cases"])


def test_start_writes_where_it_is_told(cli, tmp_path) -> None:
    out = tmp_path / "mine.py"
    assert cli("code", "start", "mha", "-o", out).code == 0
    assert "KATA = \"mha\"" in out.read_text()


@pytest.mark.parametrize("file", BUGGY, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_bug_is_named(cli, file) -> None:
    """Each held-back file has one bug, named by its file name: the check fails and names it."""
    key = file.stem.removesuffix("_torch")
    r = cli("code", "check", file, "--kata", file.parent.name, "--format", "json")
    assert r.code == 1, r.out + r.err
    doc = json.loads(r.out)
    failing = [c for c in doc["cases"] if not c["passed"]]
    assert failing and doc["passed"] is False
    named = {d["key"] for c in failing for d in c["diagnoses"]}
    assert key in named, (key, [(c["id"], [d["key"] for d in c["diagnoses"]]) for c in failing])
    assert doc["mistakes"][0] == key or key in doc["mistakes"]


def test_the_report_marks_the_wrong_entries_and_says_what_to_change(cli) -> None:
    r = cli("code", "check", REPO / "tests" / "kata_files" / "mha" / "no_scaling.py", "--kata", "mha")
    assert r.code == 1
    assert "✗ hand-fused" in r.out and "*" in r.out and "expected:" in r.out
    assert "mistake: the scores are not scaled" in r.out and "math.sqrt(d_k)" in r.out
    assert "FAIL:" in r.out


def test_show_waits_for_a_pass(cli) -> None:
    locked = cli("code", "show", "mha")
    assert locked.code == 2 and "--force" in locked.err
    assert "def multi_head_attention" in cli("code", "show", "mha", "--force").out
    assert cli("code", "check", FILES / "mha" / "torch_solution.py").code == 0
    shown = cli("code", "show", "mha", "--torch")
    assert shown.code == 0 and "class MultiHeadAttention" in shown.out


# --- a file that cannot be run as the kata: one line, exit 2 -------------------------------------


@pytest.mark.parametrize(("text", "words"), [
    ("KATA = 'mha'\ndef multi_head_attention(x:\n", ["line 2", "not valid Python"]),
    ("KATA = 'mha'\ndef attention(x):\n    return x\n", ["defines neither multi_head_attention", "attention"]),
    ("def multi_head_attention(x):\n    return x\n", ["names no kata", "KATA = "]),
    ("KATA = 'nope'\n", ["no kata 'nope'"]),
    ("KATA = 'mha'\nraise ValueError('at import')\n", ["raised while it was imported", "ValueError: at import"]),
])
def test_a_file_that_cannot_run_is_one_line(cli, tmp_path, text, words) -> None:
    f = _write(tmp_path, "mine.py", text)
    r = cli("code", "check", f)
    assert r.code == 2, r.out + r.err
    first = r.err.splitlines()[0]
    assert first.startswith("error: ") and all(w in r.err for w in words), r.err
    assert "Traceback (most recent call last)" not in r.err and "tutor/" not in r.err


def test_a_missing_file_and_a_missing_interpreter(cli, tmp_path) -> None:
    r = cli("code", "check", tmp_path / "nope.py", "--kata", "mha")
    assert r.code == 2 and "no such file" in r.err
    f = _write(tmp_path, "mine.py", "KATA = 'mha'\n")
    r = cli("code", "check", f, "--python", tmp_path / "no-python")
    assert r.code == 2 and "cannot start the Python interpreter" in r.err


def test_an_exception_shows_the_learners_own_frames(cli, tmp_path) -> None:
    _write(tmp_path, "helper.py", "def split(x):\n    return x.reshape(-1, 7, 5)\n")
    f = _write(tmp_path, "mine.py", """\
        import numpy as np
        from helper import split
        KATA = "mha"
        def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
            return split(x)
        """)
    doc = json.loads(cli("code", "check", f, "--format", "json").out)
    case = doc["cases"][0]
    assert case["problem"] == "exception" and case["exception"].startswith("ValueError")
    assert "mine.py" in case["traceback"] and "helper.py" in case["traceback"]
    assert "harness.py" not in case["traceback"] and "numpy" not in case["traceback"]


def test_a_hang_is_stopped_and_named(cli, tmp_path) -> None:
    f = _write(tmp_path, "mine.py", """\
        KATA = "mha"
        def multi_head_attention(x, *args, mask=None):
            while True:
                pass
        """)
    r = cli("code", "check", f, "--time-limit", "0.5", "--format", "json")
    assert r.code == 1
    doc = json.loads(r.out)
    numpy_cases = [c for c in catalog.get("mha").cases() if c.only in (None, "numpy")]
    assert doc["stopped"] == {"status": "hang", "case": "hand-fused", "not_run": len(numpy_cases) - 1}
    assert doc["passed"] is False
    text = cli("code", "check", f, "--time-limit", "0.5")
    assert "case hand-fused ran past its time limit: stopped" in text.out


def test_input_is_closed_and_output_is_escaped(cli, tmp_path) -> None:
    f = _write(tmp_path, "mine.py", """\
        import sys
        KATA = "mha"
        print("\\x1b]0;pwned\\x07 hello")
        def multi_head_attention(x, *args, mask=None):
            sys.stderr.write("\\x1b[2J\\n")
            return input()
        """)
    r = cli("code", "check", f)
    assert r.code == 1
    assert "\x1b" not in r.out and "\\x1b]0;pwned\\x07 hello" in r.out and "\\x1b[2J" in r.out
    assert "EOFError" in r.out


def test_memory_is_limited(cli, tmp_path) -> None:
    f = _write(tmp_path, "mine.py", """\
        import numpy as np
        KATA = "mha"
        def multi_head_attention(x, *args, mask=None):
            return np.ones((1 << 40,), dtype=np.uint8)
        """)
    doc = json.loads(cli("code", "check", f, "--format", "json").out)
    assert "MemoryError" in doc["cases"][0]["exception"]


def test_wrong_count_type_and_shape_are_explained(cli, tmp_path) -> None:
    f = _write(tmp_path, "mine.py", """\
        import numpy as np
        KATA = "mha"
        def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
            B, L, D = x.shape
            if B == 1:
                return np.zeros((B, L, D))
            if L == 4:
                return np.zeros((B, L, D)), "weights"
            return np.zeros((B, L, D)), np.zeros((B, L, L))
        """)
    doc = json.loads(cli("code", "check", f, "--format", "json").out)
    problems = {c["id"]: (c["problem"], c["diagnoses"][0]["message"]) for c in doc["cases"]}
    assert problems["hand-fused"][0] == "count" and "return 2 values (out, weights)" in problems["hand-fused"][1]
    assert problems["batch-2x4"][0] == "type" and "weights should be an array" in problems["batch-2x4"][1]
    shape = [c for c in doc["cases"] if c["problem"] == "shape"][0]
    assert shape["output"] == "weights" and shape["shape"]["got"] == [2, 5, 5]


def test_the_flavour_is_said_with_its_reason_and_can_be_told(cli, tmp_path) -> None:
    """A NumPy solution of a function kata that imports torch runs as PyTorch (and says so), unless --flavour numpy."""
    f = _write(tmp_path, "kv.py", "import torch\n" + (FILES / "kv-cache" / "numpy_solution.py").read_text())
    r = cli("code", "check", f)
    said = " ".join(r.out.split())  # the title wraps where the temporary path's length puts it
    assert r.code == 1 and "PyTorch flavour (the file imports torch; --flavour numpy to run it as NumPy)" in said
    told = cli("code", "check", f, "--flavour", "numpy", "--format", "json")
    doc = json.loads(told.out)
    assert told.code == 0 and doc["flavour"] == "numpy" and doc["flavour_because"] == "option"


def test_a_narrow_terminal_gets_wrapped_sentences(cli) -> None:
    r = cli("code", "check", REPO / "tests" / "kata_files" / "mha" / "no_scaling.py", "--kata", "mha",
            env={"COLUMNS": "60"})
    assert r.code == 1
    assert max(len(line) for line in r.out.splitlines() if "mistake" in line or line.startswith("        ")) <= 60


# --- the second trial: a program that tampers with the checker, or outlives it -----------------------


SOLUTION = FILES / "mha" / "numpy_solution.py"


def test_a_case_the_program_leaves_out_fails(cli, tmp_path) -> None:
    """A program that drops the cases it fails from what the harness reports does not pass: every case the
    checker sent must come back."""
    f = _write(tmp_path, "mine.py", """\
        import __main__
        KATA = "mha"
        _send, _held = __main__._send, {}
        def _dropping(out, event):
            if event["event"] == "start":
                _held[event["id"]] = event
                return
            if event["event"] == "error":
                return
            if event["event"] == "result":
                _send(out, _held.pop(event["id"]))
            _send(out, event)
        __main__._send = _dropping
        def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
            raise NotImplementedError
        """)
    r = cli("code", "check", f, "--format", "json")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["passed"] is False
    assert {c["problem"] for c in doc["cases"]} == {"not_run"} and len(doc["cases"]) == 6


@pytest.mark.parametrize("junk", [b"garbage\n", b"\xff\n", b"[1]\n", b'{"event": "loaded"}\n',
                                  b'{"event": "result", "id": "hand-fused", "outputs": 5}\n'])
def test_writing_on_the_events_pipe_is_one_line(cli, tmp_path, junk) -> None:
    f = _write(tmp_path, "mine.py", f"""\
        import os, sys
        KATA = "mha"
        fd = int(open("/proc/self/cmdline", "rb").read().split(b"\\0")[-2])  # the events pipe: the harness's last argument
        os.write(fd, {junk!r})
        def multi_head_attention(x, *args, mask=None):
            return x, x
        """)
    r = cli("code", "check", f)
    assert r.code == 2 and "events pipe" in r.err, r.out + r.err
    assert "internal error" not in r.err


def test_a_thread_left_running_is_not_waited_for(cli, tmp_path) -> None:
    f = _write(tmp_path, "mine.py", "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\n"
               + SOLUTION.read_text())
    r = cli("code", "check", f)
    assert r.code == 0 and "PASS: all 6 cases passed." in r.out, r.out


def test_a_byte_order_mark_is_no_syntax_error(cli, tmp_path) -> None:
    f = tmp_path / "mine.py"
    f.write_bytes(b"\xef\xbb\xbf" + SOLUTION.read_bytes())
    assert cli("code", "check", f).code == 0


def test_autograd_is_off_in_the_backward_kata(cli, tmp_path) -> None:
    f = _write(tmp_path, "bw.py", """\
        import torch
        KATA = "backward"
        def attention_backward(q, k, v, d_out, mask=None):
            with torch.enable_grad():
                q = q.clone().requires_grad_()
                (q * 2).sum().backward()
            return q.grad, k, v, q
        """)
    doc = json.loads(cli("code", "check", f, "--format", "json").out)
    assert doc["flavour"] == "torch"
    assert all("autograd" in c["exception"] for c in doc["cases"]), doc["cases"][0]


def test_stats_shows_the_katas_apart_from_the_drills(cli) -> None:
    """A kata's checks are not answers whose accuracy falls while the learner iterates: passed once is done."""
    bug = REPO / "tests" / "kata_files" / "mha" / "no_scaling.py"
    assert cli("code", "check", bug, "--kata", "mha").code == 1
    doc = json.loads(cli("stats", "--format", "json").out)["drills"]
    assert doc["katas"] == [{"kata": "mha", "checks": 1, "passed": 0}] and doc["topics"] == []
    assert doc["review"] == [{"drill": "code", "topic": "mha", "accuracy": None,
                              "command": "attn-tutor code check mha.py --watch"}]
    assert cli("code", "check", SOLUTION).code == 0
    doc = json.loads(cli("stats", "--format", "json").out)["drills"]
    assert doc["katas"] == [{"kata": "mha", "checks": 2, "passed": 1}] and doc["review"] == []
    text = cli("stats").out
    assert "Code katas:" in text and "mha: passed (1 of 2 checks passed)" in text
