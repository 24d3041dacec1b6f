"""Pin everything a test's output could depend on: home, width, colour, language."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"


@pytest.fixture(autouse=True)
def _pinned_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_TUTOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATTN_TUTOR_PATH", raising=False)
    monkeypatch.delenv("ATTN_TUTOR_LANG", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
