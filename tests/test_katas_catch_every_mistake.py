"""Every kata's cases catch every catalogued mistake it names, and tell the mistakes apart (issue 21, item 4).

The proof is the tool's own: each mistake's slips run through the kata's
reference on every case; a mistake whose outputs equal the right ones on every
case could pass a learner's code unseen, and fails this test.  Two mistakes
whose outputs are equal on every case could not be told apart; the test lists
them, and the pairs a kata declares the same computation (``K·Qᵀ`` and Q, K read
in the order K, Q) are the only ones allowed.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from tutor.katas import catalog
from tutor.katas.judge import tolerance
from tutor.katas.kata import Kata

KATAS = catalog.katas()

#: Mistakes that compute the same thing on every input (so no case can tell them apart): named together.
SAME = {
    ("mha", "kq_transposed", "qkv_order"),  # reading Q from K's rows and K from Q's rows gives K·Qᵀ
}


def _differs(a: tuple[np.ndarray, ...] | None, b: tuple[np.ndarray, ...] | None, dtype: str) -> bool:
    if a is None or b is None:
        return a is not b
    rtol, atol = tolerance("float32")
    return any(x.shape != y.shape or not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
               for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("kata", KATAS, ids=lambda k: k.id)
def test_every_mistake_changes_a_case(kata: Kata) -> None:
    cases = kata.cases()
    unseen = []
    for m in kata.mistakes:
        if m.judge is not None:
            continue
        if not any(_differs(kata.reference(c.inputs, m.slips), c.expected, c.dtype) for c in cases):
            unseen.append(f"{m.key} {sorted(m.slips)}")
    assert not unseen, f"{kata.id}: no case of the kata shows these mistakes: {unseen}"


@pytest.mark.parametrize("kata", KATAS, ids=lambda k: k.id)
def test_mistakes_are_told_apart(kata: Kata) -> None:
    cases = kata.cases()
    outs = {m.slips: [kata.reference(c.inputs, m.slips) for c in cases] for m in kata.mistakes if m.judge is None}
    keys = {m.slips: m.key for m in kata.mistakes}
    clash = []
    for a, b in combinations(outs, 2):
        if not any(_differs(x, y, c.dtype) for x, y, c in zip(outs[a], outs[b], cases, strict=True)):
            pair = tuple(sorted((keys[a], keys[b])))
            if (kata.id, *pair) not in SAME:
                clash.append(pair)
    assert not clash, f"{kata.id}: these mistakes give the same outputs on every case: {clash}"


@pytest.mark.parametrize("kata", KATAS, ids=lambda k: k.id)
def test_cases_are_what_the_issue_asks(kata: Kata) -> None:
    """Batched, in both float dtypes, a softmax far from one-hot somewhere, and a hand-sized case from the exact engine."""
    cases = kata.cases()
    assert any(c.hand for c in cases), "a hand-sized case whose values come from the exact engine"
    assert {c.dtype for c in cases} == {"float32", "float64"}
    assert any(c.sizes.get("B", 1) > 1 for c in cases)


@pytest.mark.parametrize("kata", KATAS, ids=lambda k: k.id)
def test_every_mistake_has_its_sentence(kata: Kata) -> None:
    from tutor.base.messages import EN, t

    for m in kata.mistakes:
        assert f"code.mistake.{m.key}" in EN, m.key
        assert "{" not in t(f"code.mistake.{m.key}", **m.fields)
