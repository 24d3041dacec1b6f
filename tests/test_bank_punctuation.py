"""The English concept cards write a colon where one belongs, not " - " (rope trial F11): next to formulas a
spaced hyphen reads as a subtraction ("The mask - query i sees …").  A YAML plain scalar cannot hold ": ",
which is why the cards were written with " - "; such a line is quoted instead."""

from __future__ import annotations

import re

from tutor.drills.bank import load


def _colon_dashes(text: str) -> list[str]:
    """The sentences of ``text`` with exactly one spaced hyphen used as a separator: not inside parentheses,
    not between two operands (``exp(-1e9 - max)``, ``d - 1``); a pair of them is a parenthesis, left alone."""
    found = []
    for sentence in re.split(r"(?<! al\.)(?<=[.;?!])\s+", text):  # "et al." ends no sentence
        if sentence.count(" - ") != 1:
            continue
        before, after = sentence.split(" - ")
        if before.count("(") > before.count(")"):
            continue
        if re.search(r"[0-9a-z_)\]]$", before) and re.match(r"[0-9(]|max\b|min\b", after):
            continue
        found.append(sentence)
    return found


def test_the_rule_finds_the_findings_sentences_and_spares_arithmetic():
    assert _colon_dashes("The mask - query i sees the S sink keys j < S.")
    assert _colon_dashes("Example - two slots, requests of 10, 2, 2, 2 and 2 iterations.")
    assert not _colon_dashes("exp(-1e9 - max) underflows to 0.")
    assert not _colon_dashes("blocks - the prompt's blocks among samples - with a count.")


def test_no_english_card_uses_a_spaced_hyphen_for_a_colon():
    bank = load()
    bad = []
    for c in bank.concepts:
        q = c.q.in_language("en")
        texts = [q.question, q.short_answer, q.model_answer, *q.key_points, *q.sources,
                 *(w.answer for w in q.wrong_answers), *(w.why for w in q.wrong_answers)]
        bad += [f"{c.id}: {s}" for text in texts for s in _colon_dashes(text)]
    assert not bad, "\n".join(bad)
