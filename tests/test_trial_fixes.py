"""Issue 23, what a trial of the v3 features found: each test fails on the code before its fix.

Every expected line is the whole line, written by hand from the file it reads
(line and column counted 1-based in the YAML below).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WINDOW = (REPO / "exercises" / "sliding-window-sinks-4x2.yaml").read_text(encoding="utf-8")


def _window_file(tmp_path: Path, mask: str) -> Path:
    """The bundled window exercise (4 tokens, L_k = 4) with ``mask`` on line 42, under another id."""
    text = WINDOW.replace("mask: {sliding_window: 2, sinks: 1}", "mask: " + mask)
    text = text.replace("id: sliding-window-sinks-4x2", "id: trial-window")
    assert text.splitlines()[41] == "mask: " + mask
    p = tmp_path / "w.yaml"
    p.write_text(text, encoding="utf-8")
    return p


# --- 1. a huge window or count of sinks is refused at its field, not an OverflowError in explain -----

HUGE = "99999999999999999999999"


@pytest.mark.parametrize("mask, col, name", [
    ("{sliding_window: " + HUGE + "}", 24, "sliding_window"),
    ("{sliding_window: 2, sinks: " + HUGE + "}", 34, "sinks"),
])
@pytest.mark.parametrize("command", ["validate", "explain"])
def test_a_huge_window_or_sinks_is_one_line_at_its_field_exit_2(cli, tmp_path, mask, col, name, command):
    f = _window_file(tmp_path, mask)
    r = cli(command, str(f))
    assert r.code == 2
    line = (f"{f}:42:{col}: mask.{name}: {name} is {HUGE}, above the limit of 16 (the limits keep an exercise "
            f"small enough for paper and for the exact engine; make {name} at most 16)")
    stream = r.out if command == "validate" else r.err
    assert "Traceback" not in r.err
    assert [ln for ln in stream.splitlines() if f"mask.{name}" in ln] == [line if command == "validate" else "error: " + line]


def test_a_window_of_16_is_still_valid_and_17_is_not(cli, tmp_path):
    assert cli("validate", str(_window_file(tmp_path, "{sliding_window: 16}"))).code == 0
    assert cli("validate", str(_window_file(tmp_path, "{sliding_window: 17}"))).code == 2


def test_sinks_covering_every_key_warn_like_an_oversized_window(cli, tmp_path):
    f = _window_file(tmp_path, "{sliding_window: 2, sinks: 4}")
    r = cli("validate", str(f))
    assert r.code == 0
    assert (f"{f}:42:34: warning: mask.sinks: sinks: 4 is at least L_k = 4: every key is a sink, so the mask is "
            "the causal one (use fewer sinks than L_k to see keys leave the window)") in r.out.splitlines()
    assert "mask.sinks" not in cli("validate", str(_window_file(tmp_path, "{sliding_window: 2, sinks: 3}"))).out
