"""Scripted sessions through Typer's own test runner (the app object, no subprocess)."""

from __future__ import annotations

import math

from typer.testing import CliRunner

from tutor.cli import app

runner = CliRunner()


def test_practice_scripted_through_typers_runner():
    """The learner forgets 1/sqrt(d_k) at `scaled`, is told so, corrects it, then quits."""
    scores = "2 4 4; 4 8 8; 4 8 8"
    r2 = math.sqrt(2)
    scaled = "; ".join(" ".join(f"{v / r2:.2f}" for v in row) for row in ((2, 4, 4), (4, 8, 8), (4, 8, 8)))
    answers = "\n".join([scores, scores, scaled, "quit"]) + "\n"  # scores; scaled: unscaled, then right
    result = runner.invoke(app, ["practice", "single-head-3x4", "--steps", "scores,scaled,weights"], input=answers)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("Diagnosis: You forgot to divide by sqrt(d_k): scaled = scores / sqrt(2).") == 1
    assert out.count("✓ Right") == 2  # scores at once, scaled at the second try
    assert "Session ended." in out


def test_practice_names_the_forgotten_scaling_through_typers_runner():
    answers = "2 4 4; 4 8 8; 4 8 8\nquit\n"  # the unscaled scores typed at the `scaled` step
    result = runner.invoke(app, ["practice", "single-head-3x4", "--steps", "scaled"], input=answers)
    assert result.exit_code == 0, result.output
    assert "Diagnosis: You forgot to divide by sqrt(d_k): scaled = scores / sqrt(2)." in result.output


def test_explain_json_through_typers_runner():
    import json

    result = runner.invoke(app, ["explain", "single-head-3x4", "--format", "json"])
    assert result.exit_code == 0
    weights = next(s for s in json.loads(result.output)["steps"] if s["id"] == "weights")
    assert math.isclose(weights["value"][0][0], 1 / (1 + 2 * math.exp(math.sqrt(2))), rel_tol=1e-14)
