"""``code check`` after the issue 23/24 trial: what the tester's kata files showed, each held by a test.

A complex result is named as one (not the checker's JSON error blamed on the learner); a result of
the right values in another dtype than the contract's fails, named; after a crash or a hang the summary
counts every case of the flavour and says how many never ran; output past the kept 64 KiB is said to be
cut; the interviewer's questions are wrapped; a mistake the passing cases rule out is not offered; a
process the learner's file starts with a double fork and ``setsid`` does not outlive the check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tutor.base.catalogs.en import EN
from tutor.base.catalogs.zh import ZH
from tutor.base.cells import cell_len
from tutor.katas import catalog

from .conftest import REPO, default_sigint, with_changes

ROPE = REPO / "tutor" / "katas" / "files" / "rope"
SOLUTION = (ROPE / "numpy_solution.py").read_text(encoding="utf-8")
TORCH_SOLUTION = (ROPE / "torch_solution.py").read_text(encoding="utf-8")
N_CASES = len(catalog.get("rope").cases())  # the rope kata has no case for one flavour only
RETURN = "    return out.astype(x.dtype, copy=False)\n"


def _file(tmp_path: Path, text: str, name: str = "rope_mine.py") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


def _with(old: str, new: str, text: str = SOLUTION) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _json(cli, f: Path, *args: str):
    r = cli("code", "check", f, "--format", "json", *args)
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def test_a_complex_result_is_named_with_the_way_back_to_real_numbers(cli, tmp_path) -> None:
    """NumPy's complex128: the checker says what came back and how to turn it into the pairs, never "your code
    raised TypeError: Object of type complex is not JSON serializable" (its own JSON's failure)."""
    f = _file(tmp_path, _with(RETURN, "    return out.astype(np.complex128)\n"))
    doc = _json(cli, f)
    assert not doc["passed"]
    rotations = [c for c in doc["cases"] if c["output"] == "x_rot"]
    assert rotations and all(c["problem"] == "type" for c in rotations)
    assert "JSON" not in json.dumps(doc) and "TypeError" not in json.dumps(doc)
    half = next(c for c in rotations if c["id"] == "half-4d")["diagnoses"][0]["message"]
    assert "complex128" in half and "`np.concatenate([z.real, z.imag], axis=-1)`" in half
    r = cli("code", "check", f, "--lang", "zh", env={"COLUMNS": "1000"})
    assert "complex128" in r.out and "即复数" in r.out


def test_the_torch_flavour_complex_result_is_named(cli, tmp_path) -> None:
    """torch.polar without torch.view_as_real: complex64, and the PyTorch line back."""
    text = TORCH_SOLUTION.replace("def apply_rope(", "def _apply_rope_real(", 1) + (
        "\n\ndef apply_rope(x, positions, base=10000.0, pairing='half'):\n"
        "    out = _apply_rope_real(x, positions, base, pairing)\n"
        "    return torch.polar(torch.ones_like(out), out)\n")
    doc = _json(cli, _file(tmp_path, text, "rope_torch.py"))
    assert doc["flavour"] == "torch"
    inter = next(c for c in doc["cases"] if c["id"] == "interleaved-4d-float32")["diagnoses"][0]["message"]
    assert "complex64" in inter and "`torch.view_as_real(z).flatten(-2)`" in inter
    assert "JSON" not in json.dumps(doc)


def test_the_right_values_in_another_dtype_fail_named_where_the_contract_says_the_dtype(cli, tmp_path) -> None:
    doc = _json(cli, _file(tmp_path, _with(RETURN, "    return out.astype(np.float64)\n")))
    assert not doc["passed"]
    for c in doc["cases"]:
        if c["dtype"] == "float32" and c["output"] is None and not c["passed"]:
            assert c["problem"] == "dtype"
    wrong = {c["id"] for c in doc["cases"] if not c["passed"]}
    assert wrong == {"interleaved-4d-float32", "half-3d-float32"}  # apply_rope's float32 cases; the step's dtype is free
    said = next(c for c in doc["cases"] if c["id"] == "half-3d-float32")["diagnoses"]
    assert [d["key"] for d in said] == ["dtype"]
    assert "float64" in said[0]["message"] and "`x_rot = x_rot.astype(x.dtype)`" in said[0]["message"]
    assert doc["mistakes"] == ["dtype"]


def test_after_a_crash_or_a_hang_the_summary_counts_the_cases_never_run(cli, tmp_path) -> None:
    crash = _file(tmp_path, _with("    d = x.shape[-1]\n", "    import os; os._exit(3)\n"), "crash.py")
    r = cli("code", "check", crash)
    assert r.code == 1
    assert EN["code.failed.not_run_after_crash"].split(":")[0] in r.out
    assert f"FAIL: 0 of {N_CASES} cases passed; {N_CASES - 1} not run after the crash." in r.out
    hang = _file(tmp_path, _with("    T, d = q.shape[2], q.shape[3]\n", "    while True:\n        pass\n"), "hang.py")
    doc = _json(cli, hang, "--time-limit", "0.5")
    assert doc["stopped"] == {"status": "hang", "case": "hand-prefill", "not_run": N_CASES - 2}
    r = cli("code", "check", hang, "--time-limit", "0.5", "--lang", "zh")
    assert f"通过了 1 个；超时被停止的用例之后还有 {N_CASES - 2} 个没有运行。" in r.out


def test_output_past_what_is_kept_is_said_to_be_cut(cli, tmp_path) -> None:
    f = _file(tmp_path, _with('KATA = "rope"\n', 'KATA = "rope"\nprint("x" * 5_000_000)\n'))
    doc = _json(cli, f)
    assert doc["stdout_cut_bytes"] == 5_000_001 - 64 * 1024 and doc["stderr_cut_bytes"] == 0
    r = cli("code", "check", f)
    assert "… 4.9 MB more not shown: only the first 64 KiB of each stream is kept" in r.out
    assert "more not shown" not in cli("code", "check", ROPE / "numpy_solution.py").out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_interviewers_questions_are_wrapped_to_the_width(cli, lang) -> None:
    r = cli("code", "check", ROPE / "numpy_solution.py", "--lang", lang, env={"COLUMNS": "60"})
    assert r.code == 0, r.err
    follow = r.out.split((EN if lang == "en" else ZH)["code.follow_ups"])[1].splitlines()
    assert len(follow) > 3  # three questions, at least one on two lines
    path = str(ROPE / "numpy_solution.py")  # the report's first line names the file: a path is not broken
    assert all(cell_len(line) <= 60 for line in r.out.splitlines() if "|" not in line and path not in line), r.out
    assert "rope-scaling" in r.out and not any(line.endswith("-") for line in follow)  # no word broken


def test_a_mistake_the_passing_cases_rule_out_is_not_offered(cli, tmp_path) -> None:
    """New tokens turned at 0 … T − 1: apply_rope itself is right (its cases with positions out of order pass), so
    "apply_rope turns row p by p·θ_i" is not offered beside the decode step's own mistake."""
    f = _file(tmp_path, _with("    positions = np.arange(P, P + T)", "    positions = np.arange(T)   "))
    doc = _json(cli, f)
    assert all(c["passed"] for c in doc["cases"] if c["output"] != "out")
    keys = {d["key"] for c in doc["cases"] for d in c["diagnoses"]}
    assert "rope_decode_position_0" in keys and "rope_positions_ignored" not in keys


DAEMON = '''
import os, signal

KATA = "rope"


def apply_rope(x, positions, base=10000.0, pairing="half"):
    """Leaves a process behind that no process group reaches (a double fork and setsid), then {then}."""
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open({pidfile!r}, "w") as f:
                f.write(str(os.getpid()))
            os.write(ready_w, b"1")
            while True:
                signal.pause()
        os._exit(0)
    os.wait()
    os.read(ready_r, 1)  # the daemon has written its pid
    {action}
    return x
'''


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    os.kill(pid, signal.SIGKILL)  # a test that fails leaves nothing running
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_a_double_forked_setsid_process_does_not_outlive_the_check(cli, tmp_path) -> None:
    pidfile = tmp_path / "daemon.pid"
    f = _file(tmp_path, DAEMON.format(then="returns", pidfile=str(pidfile), action="pass"))
    r = cli("code", "check", f)
    assert r.code == 1, r.err
    assert _gone(int(pidfile.read_text()))


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_ctrl_c_stops_what_the_file_started_in_a_session_of_its_own(variables, tmp_path) -> None:
    """The file sends attn-tutor SIGINT (Ctrl-C) once its daemon runs: attn-tutor stops the check, and the daemon."""
    pidfile = tmp_path / "daemon.pid"
    action = "os.kill(os.getppid(), signal.SIGINT)  # attn-tutor, as Ctrl-C would\n    while True:\n        pass"
    f = _file(tmp_path, DAEMON.format(then="Ctrl-C", pidfile=str(pidfile), action=action))
    env = with_changes({**os.environ, **variables}, {})
    done = subprocess.run([sys.executable, "-m", "tutor", "code", "check", str(f)], capture_output=True, env=env,
                          cwd=REPO, timeout=180, preexec_fn=default_sigint, check=False)
    assert done.returncode == 130, done.stderr
    assert _gone(int(pidfile.read_text()))
