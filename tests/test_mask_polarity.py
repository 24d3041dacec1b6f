"""Issue 10, section 2: PyTorch's mask polarity in exercise files, `validate`, `new` and `explain`.

An exercise file takes `key_padding_mask:` in PyTorch's polarity (True =
padding, as nn.MultiheadAttention's key_padding_mask) and still reads the v1
`key_padding:` (True = a real key) with a warning; `explain` spells every
mask as PyTorch takes it.  That the spellings are right is proven against
torch in tests/test_torch_parity.py (test_production_mask_spellings_run_in_torch).
"""

from __future__ import annotations

import json

import pytest

from tutor.authoring.generate import Spec, generate
from tutor.base.errors import ExerciseError
from tutor.exercise import json_schema, parse_exercise, validate_text

from .test_exercise import BASE, only, where

# BASE has 3 tokens (self-attention: L_k = 3); an appended field starts on line 8.


def test_key_padding_mask_is_pytorchs_polarity():
    ex = parse_exercise(BASE + "key_padding_mask: [false, true, false]\n", "f.yaml")
    assert ex.key_padding == (True, False, True)  # the record: True = a real key
    assert ex.key_padding_mask == (False, True, False)
    assert ex.allowed() == ((True, False, True),) * 3  # key 2 is padding: no query may attend it
    v = validate_text(BASE + "key_padding_mask: [false, true, false]\n", "f.yaml")
    assert v.ok and v.warnings == ()


def test_key_padding_is_still_read_with_a_warning_naming_the_new_field():
    v = validate_text(BASE + "key_padding: [true, false, true]\n", "f.yaml")
    assert v.ok and v.exercise.key_padding == (True, False, True)
    (w,) = v.warnings
    assert where(w) == ("f.yaml", 8, 14, "key_padding")
    assert "true = a real key" in w.message and "key_padding_mask (true = padding)" in w.message
    assert w.hint == "write key_padding_mask: [false, true, false] instead; key_padding is still read"


def test_both_fields_must_say_the_same():
    same = validate_text(BASE + "key_padding: [true, false, true]\nkey_padding_mask: [false, true, false]\n", "f.yaml")
    assert same.ok and same.exercise.key_padding == (True, False, True)
    (w,) = same.warnings
    assert w.field == "key_padding" and "remove key_padding" in w.hint
    # the same booleans in both fields mean opposite things: an error at the first key they disagree on
    p = only(BASE + "key_padding: [true, false, true]\nkey_padding_mask: [false, false, false]\n")
    assert where(p) == ("f.yaml", 9, 27, "key_padding_mask[1]")
    assert "disagree" in p.message and "negation" in p.hint


def test_key_padding_mask_length_and_entries():
    p = only(BASE + "key_padding_mask: [true, false]\n")
    assert where(p) == ("f.yaml", 8, 19, "key_padding_mask")
    assert p.message == "key_padding_mask has 2 entries but L_k (rows of x) is 3"
    p = only(BASE + "key_padding_mask: [true, off, true]\n")
    assert where(p) == ("f.yaml", 8, 26, "key_padding_mask[1]")
    assert "expected true or false" in p.message
    with pytest.raises(ExerciseError):  # the wrong length gets no polarity note on top
        parse_exercise(BASE + "key_padding: [true, false]\n", "f.yaml")
    v = validate_text(BASE + "key_padding: [true, false]\n", "f.yaml")
    assert not v.ok and v.warnings == ()


def test_the_schema_describes_both_fields_with_their_polarity():
    props = json_schema()["properties"]
    assert "true marks a padding key" in props["key_padding_mask"]["description"]
    assert "true = a real key" in props["key_padding"]["description"]


def test_new_writes_key_padding_mask_and_validate_has_nothing_to_say():
    text = generate(Spec(tokens=4, mask="padding", seed=1))
    assert "key_padding_mask: [false, false, false, true]" in text and "\nkey_padding:" not in text
    v = validate_text(text, "new.yaml")
    assert v.ok and v.warnings == () and v.exercise.key_padding == (True, True, True, False)


def test_bundled_exercises_use_the_new_field(cli):
    code, out, err = cli("validate", "exercises")
    assert code == 0 and "warning" not in out + err


# --- explain: the production view spells every mask as PyTorch takes it --------------------


def test_production_view_spells_the_padding_mask_in_pytorch(cli):
    code, out, _ = cli("explain", "padding-4x2")
    assert code == 0
    view = out[out.index("The masks as PyTorch takes them"):]
    lines = [line.strip() for line in view.splitlines()]
    assert lines[1] == "nn.MultiheadAttention"
    assert lines[2] == "key_padding_mask=torch.tensor([[False, False, False, True]])"
    assert lines[3] == "True = padding (that key is ignored)"
    assert lines[4] == "F.scaled_dot_product_attention"
    assert "attn_mask=torch.tensor([[True, True, True, False]," in lines[5]
    assert "True = may attend" in view


def test_production_view_of_a_causal_exercise(cli):
    _, out, _ = cli("explain", "two-head-causal-3x4")
    assert "attn_mask=torch.tensor([[False, True, True], [False, False, True], [False, False, False]])" in out
    assert "a boolean attn_mask here means True = blocked" in out
    assert "is_causal=True" in out and "top-left aligned" in out
    _, out, _ = cli("explain", "single-head-3x4")
    assert "The masks as PyTorch takes them" not in out  # no mask, nothing to spell


def test_production_masks_in_json(cli):
    _, out, _ = cli("explain", "fully-masked-row-3x3", "--format", "json")
    doc = json.loads(out)
    masks = doc["production_masks"]
    assert [(m["api"], m["argument"]) for m in masks] == [("nn.MultiheadAttention", "attn_mask"),
                                                          ("F.scaled_dot_product_attention", "attn_mask")]
    mask = [[True, True, False], [True, True, True], [False, False, False]]  # the file's mask: True = may attend
    assert masks[0]["value"] == [[not a for a in row] for row in mask] and "True = blocked" in masks[0]["meaning"]
    assert masks[1]["value"] == mask and "True = may attend" in masks[1]["meaning"]
    assert masks[0]["code"] == "attn_mask=torch.tensor([[False, False, True], [False, False, False], [True, True, True]])"
    _, out, _ = cli("explain", "padding-4x2", "--format", "json")
    ex = json.loads(out)["exercise"]
    assert ex["key_padding_mask"] == [False, False, False, True] and ex["key_padding"] == [True, True, True, False]


def test_production_masks_at_a_narrow_width_in_ascii(cli_encoded):
    done = cli_encoded("explain", "two-head-causal-3x4", encoding="ascii", env={"COLUMNS": "40", "NO_COLOR": "1"})
    assert done.code == 0
    text = done.stdout.decode("ascii")
    view = text[text.index("The masks as PyTorch takes them"):]
    assert "attend keys j <= i" in view  # ≤ in ASCII
    assert all(len(line) <= 40 for line in view.splitlines())
    assert "".join(line.strip() for line in view.splitlines()[2:5]).replace(" ", "") == \
        "attn_mask=torch.tensor([[False,True,True],[False,False,True],[False,False,False]])"
