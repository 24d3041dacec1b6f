"""``drill concepts --mode choice``: the length of an option says nothing about whether it is right (rope trial
F15: the right option was the longest in 30 of 30 questions drawn, so a candidate scored 100% knowing nothing)."""

from __future__ import annotations

import random

import pytest

from tutor.base.messages import use_language
from tutor.drills import concepts
from tutor.drills.bank import BankError, load, validate_file


def _shares(lang: str, draws: int = 40) -> tuple[float, float, float]:
    """Over ``draws`` quizzes of the whole bank: the share of questions whose right option is strictly the
    longest, strictly the shortest, and what a blind guess would get (the mean of 1/options)."""
    bank = load()
    longest = shortest = chance = n = 0.0
    with use_language(lang):
        for seed in range(draws):
            for q in concepts.questions(bank, seed=seed, count=len(bank.concepts), mode="choice"):
                right = next(len(c.text) for c in q.choices if c.right)
                wrong = [len(c.text) for c in q.choices if not c.right]
                longest += right > max(wrong)
                shortest += right < min(wrong)
                chance += 1 / len(q.choices)
                n += 1
    return longest / n, shortest / n, chance / n


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_right_option_is_the_longest_or_the_shortest_about_as_often_as_chance(lang):
    longest, shortest, chance = _shares(lang)
    assert 0.25 < chance < 0.35  # 3 or 4 options a question
    assert abs(longest - chance) < 0.12, (longest, chance)
    assert abs(shortest - chance) < 0.15, (shortest, chance)


def test_picking_the_longest_option_scores_about_chance():
    """The finding's strategy, played: always pick the longest option."""
    bank = load()
    right = total = 0
    for seed in range(40):
        for q in concepts.questions(bank, seed=seed, count=12, mode="choice"):
            pick = max(q.choices, key=lambda c: len(c.text))
            right += pick.right
            total += 1
    assert right / total < 0.45, right / total


def test_every_bundled_question_has_a_choice_answer_in_both_languages():
    for c in load().concepts:
        assert c.q.choice_answer and c.q.translations["zh"].choice_answer, c.id
        q = concepts.to_question(c, "choice", random.Random(0))
        assert c.q.choice_answer in {ch.text for ch in q.choices}


def test_a_choice_answer_in_one_language_only_is_one_problem(tmp_path):
    path = tmp_path / "bank.yaml"
    path.write_text(
        "topic: t\nquestions:\n  - id: q1\n    question: Why?\n    key_points: [a, b]\n    model_answer: Because.\n"
        "    short_answer: Because, in full.\n    choice_answer: Because.\n"
        "    wrong_answers: [{answer: No., why: It is.}, {answer: Never., why: It is.}]\n"
        "    translations:\n      zh:\n        question: 为什么？\n        key_points: [甲, 乙]\n        model_answer: 因为。\n"
        "        short_answer: 因为如此。\n        wrong_answers: [{answer: 不。, why: 是的。}, {answer: 从不。, why: 是的。}]\n",
        encoding="utf-8")
    problems = validate_file(path)
    assert len(problems) == 1 and "choice_answer" in str(problems[0]), problems
    with pytest.raises(BankError):
        load([tmp_path], bundled=False)
