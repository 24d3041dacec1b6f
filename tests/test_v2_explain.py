"""What a learner reads for format v2, to the character: golden text for a decode step and for MQA (width 100, no
colour), and the essentials of each bundled v2 exercise in every format (explain, practice, check, export)."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import REPO

GOLDEN = REPO / "tests" / "golden"
V2 = ["mqa-two-heads-3x4", "gqa-four-heads-2x4", "decode-one-token-cache-3", "decode-two-tokens-alignment",
      "causal-left-padding-4x2", "alibi-causal-3x2"]


@pytest.mark.parametrize("name", ["decode-one-token-cache-3", "mqa-two-heads-3x4"])
def test_golden(cli, name):
    code, out, err = cli("explain", name)
    assert code == 0 and err == ""
    golden = GOLDEN / f"explain-{name}.txt"
    if os.environ.get("ATTN_TUTOR_UPDATE_GOLDEN") == "1":  # pragma: no cover - regenerating by hand
        golden.write_text(out)
    assert out == golden.read_text()


def test_the_annotations_show_the_sharing_and_the_append(cli):
    _, out, _ = cli("explain", "mqa-two-heads-3x4")
    assert "X [3×4] · W_K [4×2] → K [3×2], K/V head 1, shared by query heads 1, 2" in out
    assert "enable_gqa=True" in out
    _, out, _ = cli("explain", "decode-one-token-cache-3")
    assert "[K_cache [3×2]; K_new [1×2]] → K [4×2]" in out
    assert "attn_mask=causal_lower_right(1, 4)" in out and "torch.cat([k_cache, k_new], dim=-2)" in out
    assert "j ≤ i + L_k − L_q = i + 3" in out
    _, out, _ = cli("explain", "alibi-causal-3x2")
    assert "scaled [3×3] + B [3×3] → biased [3×3]" in out and "m = 2^(−8·1/2) = 1/16" in out


@pytest.mark.parametrize("name", V2)
def test_every_v2_exercise_explains_practises_checks_and_exports(cli, tmp_path, name):
    for fmt in ("markdown", "html", "json"):
        code, out, err = cli("explain", name, "--format", fmt)
        assert code == 0 and err == "" and out, fmt
    doc = json.loads(cli("explain", name, "--format", "json").out)
    # check: the right values of every step, as JSON gives them, pass
    lines = [f"exercise: {name}", "heads:"]
    by_head: dict = {}
    layer = []
    for s in doc["steps"]:
        value = [[("-inf" if v is None else f"{v:.12f}") for v in row] for row in s["value"]]
        text = "[" + ", ".join("[" + ", ".join(f'"{v}"' if v == "-inf" else v for v in row) + "]" for row in value) + "]"
        if s["head"] is None and "kv_head" in s:
            by_head.setdefault(s["shared_by"][0], []).append(f"    {s['id']}: {text}")
        elif s["head"] is None:
            layer.append(f"{s['id']}: {text}")
        else:
            by_head.setdefault(s["head"], []).append(f"    {s['id']}: {text}")
    for h in sorted(by_head):
        lines.append("  - " + by_head[h][0].strip())
        lines += by_head[h][1:]
    path = tmp_path / "sol.yaml"
    path.write_text("\n".join(lines + layer) + "\n")
    r = cli("check", str(path))
    assert r.code == 0, r.out + r.err
    # practice: every step shown, in order, and saved
    r = cli("practice", name, input="show\n" * 80)
    assert r.code == 0 and "Your answers are saved" in r.out
    # export: a handout and a worksheet
    r = cli("explain", name, "--export", str(tmp_path / f"{name}.md"))
    assert r.code == 0, r.err


def test_the_full_forward_note_says_what_the_engine_finds_and_only_where_it_can():
    """The note beside a decode step's last step (issue 20, D) is the engine's finding on the unrolled exercise:
    'exactly' on the bundled file; on a record whose past_x is not what the cache holds (the loader refuses
    such a file, so it is built by hand here) it says the rows differ; a top-left mask or no past_x: no note;
    a worksheet or JSON: no note."""
    from dataclasses import replace

    from tutor.exercise.catalog import resolve
    from tutor.exercise.record import causal, unrolled
    from tutor.render.outline import outline
    from tutor.steps import solve

    def note(ex, **kw):
        said = [n for item in outline(solve(ex), **kw).steps for n in item.notes if "full forward" in n]
        return said[0] if said else None

    ex = resolve("decode-one-token-cache-3")
    assert "gives as its last row exactly this row of head_1: [0.5052, 0.8772]" in note(ex)
    assert note(ex, blank=True) is None and note(ex, keys=True) is None
    wrong = replace(ex, past_x=((0, 0), (0, 0), (0, 0)))  # the cache is no longer the projection of past_x
    assert "gives another last row than this row of head_1" in note(wrong)
    assert note(replace(ex, past_x=None)) is None
    top_left = replace(ex, mask_kind="causal", mask=causal(1, 4))
    assert unrolled(top_left) is None and note(top_left) is None
