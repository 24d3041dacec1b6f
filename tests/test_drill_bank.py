"""The concept bank: the bundled one is complete and valid; an instructor's bank is checked like exercises,
every problem at its line; `drill concepts` asks chains of follow-ups, free or as choices."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tutor.drills import concepts
from tutor.drills.bank import BUNDLED, BankError, load
from tutor.drills.record import grade

#: The topics issue 14 asks the bank to cover, as the bank names them.
TOPICS = {"scaling", "heads", "w-o", "k-v", "fused-qkv", "masks", "fully-masked", "cross-attention", "cost",
          "flash-attention", "stable-softmax", "kv-cache", "gqa", "causal-alignment", "rope", "alibi", "dropout",
          "layer-norm", "mixed-precision", "testing"}

GOOD = """\
topic: my-topic
questions:
  - id: my-question
    question: What does my course want to hear?
    key_points: [the first point, the second point]
    model_answer: The whole answer.
    short_answer: The short answer.
    wrong_answers:
      - {answer: A wrong answer., why: Why it is wrong.}
      - {answer: Another wrong one., why: Why that one is wrong.}
    follow_ups: [why-scale]
"""


def test_the_bundled_bank_has_30_questions_over_every_topic_each_with_follow_ups():
    bank = load()
    assert len(bank.concepts) >= 30
    assert TOPICS <= set(bank.topics)
    for c in bank.concepts:
        assert c.q.follow_ups, c.id
        assert len(c.q.key_points) >= 2 and len(c.q.wrong_answers) >= 2 and c.q.model_answer and c.q.short_answer


def test_validate_checks_the_bundled_bank(cli):
    code, out, err = cli("validate", str(BUNDLED), "--format", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["valid"] and doc["summary"]["files"] == len(list(BUNDLED.glob("*.yaml")))


def test_validate_reports_every_problem_of_a_bank_file_at_its_place(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("key_points: [the first point, the second point]", "key_points: [only one]")
                   .replace("    follow_ups: [why-scale]\n", "    follow_ups: [why-scale]\n    claimz: []\n")
                   .replace("{answer: Another wrong one., why: Why that one is wrong.}",
                            "{answer: Another wrong one., why: Why that one is wrong., extra: 1}"))
    code, out, err = cli("validate", str(bad))
    assert code == 2
    assert out.splitlines() == [
        f"{bad}:5:17: questions[0].key_points: key_points needs at least 2 entries",
        f"{bad}:10:67: questions[0].wrong_answers[1].extra: unknown field (see docs/concept-bank.md for the fields)",
        f"{bad}:12:5: questions[0].claimz: unknown field (did you mean 'claims'?)",
    ]


def test_ids_and_follow_ups_are_checked_across_the_bank(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("id: my-question", "id: why-scale") + GOOD.split("questions:\n")[1]
                   .replace("follow_ups: [why-scale]", "follow_ups: [no-such-question, my-question]"))
    code, out, err = cli("validate", str(bad))
    assert code == 2
    assert out.splitlines() == [
        f"{bad}:3:9: questions[0].id: the id why-scale is already used in bundled:scaling.yaml",
        f"{bad}:20:18: questions[1].follow_ups[0]: follow-up no-such-question of my-question is not a question of the bank",
        f"{bad}:20:36: questions[1].follow_ups[1]: my-question names itself as a follow-up",
    ]


def test_a_bank_file_that_is_not_yaml_or_not_a_mapping(tmp_path, cli):
    (tmp_path / "a.yaml").write_text("questions: [\n")
    (tmp_path / "b.yaml").write_text("- questions\n")
    code, out, _ = cli("validate", str(tmp_path / "a.yaml"))
    assert code == 2 and "not valid YAML" in out
    with pytest.raises(BankError) as info:
        load([tmp_path], bundled=False)
    assert [p.file for p in info.value.problems] == [str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]


def test_an_instructors_bank_is_used_beside_the_bundled_one(tmp_path, cli):
    (tmp_path / "mine.yaml").write_text(GOOD)
    code, out, err = cli("drill", "concepts", "--bank", tmp_path, "--list", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    ids = {q["id"]: q for q in doc["questions"]}
    assert "my-topic" in doc["topics"] and ids["my-question"]["source"] == str(tmp_path)
    assert ids["why-scale"]["source"] == "bundled" and ids["why-scale"]["topic"] == "scaling"
    code, out, err = cli("drill", "concepts", "--bank", tmp_path, "--topic", "my-topic", "--count", 2, "--seed", 1,
                         "--show-answers", "--format", "json")
    assert code == 0, err
    questions = json.loads(out)["questions"]
    assert [q["id"] for q in questions] == ["my-question", "why-scale"]  # the chain reaches the bundled bank
    assert questions[1]["follow_up"] == "my-question"
    assert questions[0]["key_points"] == ["the first point", "the second point"]


def test_a_broken_bank_stops_the_drill_with_every_problem(tmp_path, cli):
    (tmp_path / "mine.yaml").write_text(GOOD.replace("follow_ups: [why-scale]", "follow_ups: [nowhere]"))
    code, out, err = cli("drill", "concepts", "--bank", tmp_path)
    assert code == 2 and out == ""
    assert err == f"error: {tmp_path / 'mine.yaml'}:11:18: questions[0].follow_ups[0]: follow-up nowhere of my-question is not a question of the bank\n"


def test_list_names_every_question_and_topic(cli):
    code, out, err = cli("drill", "concepts", "--list", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["questions"]) == len(load().concepts) and set(doc["topics"]) >= TOPICS
    assert {"id", "topic", "question", "follow_ups"} <= set(doc["questions"][0])
    code, out, err = cli("drill", "concepts", "--list")
    assert code == 0 and "why-scale: Why are the scores divided by √d_k before the softmax?" in out


def test_an_unknown_topic_is_a_usage_error_naming_the_topics(cli):
    code, out, err = cli("drill", "concepts", "--topic", "nope")
    assert code == 2 and "no topic 'nope' in the concept bank; the topics are: " in err and "scaling" in err


def test_a_chain_follows_the_follow_ups_depth_first_without_repeats():
    bank = load()
    qs = concepts.questions(bank, seed=0, count=40, topic="scaling")
    assert qs[0].topic == "scaling" and qs[0].follow_up is None
    ids = [q.id for q in qs]
    assert len(ids) == len(set(ids))
    for q in qs:
        if q.follow_up is not None:
            assert q.id in bank.get(q.follow_up).q.follow_ups


@pytest.mark.parametrize("seed", range(10))
def test_choice_mode_offers_the_choice_answer_and_the_wrong_answers(seed):
    bank = load()
    c = random.Random(seed).choice(bank.concepts)
    q = concepts.to_question(c, "choice", random.Random(seed))
    texts = {ch.text for ch in q.choices}
    assert (c.q.choice_answer or c.q.short_answer) in texts and len(texts) == len(q.choices) == min(4, 1 + len(c.q.wrong_answers))
    right = next(ch for ch in q.choices if ch.right)
    assert grade(q, right.key.lower()).outcome == "correct"
    for ch in q.choices:
        if not ch.right:
            verdict = grade(q, ch.key)
            assert verdict.outcome == "wrong" and verdict.details == (ch.why,)


def test_text_from_a_bank_file_reaches_the_terminal_escaped(tmp_path, cli):
    (tmp_path / "mine.yaml").write_text(GOOD.replace("What does my course want to hear?",
                                                     "What does \\x1b[31mmy course\\u202e want?").replace(
        "question: What", 'question: "What').replace("want?", 'want?"'))
    code, out, err = cli("drill", "concepts", "--bank", tmp_path, "--topic", "my-topic", "--count", 1, "--seed", 1,
                         input="quit\n")
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out
    assert "What does \\x1b[31mmy course\\u202e want?" in out


def test_every_bundled_file_is_a_bank_file():
    for f in sorted(BUNDLED.iterdir()):
        assert f.suffix == ".yaml", f
        assert f.read_text(encoding="utf-8").startswith("# Concept bank"), f


def test_the_bank_documentation_names_every_field():
    from tutor.drills.bank import BankFile, ConceptQuestion, WrongAnswer

    doc = (Path(__file__).resolve().parent.parent / "docs" / "concept-bank.md").read_text(encoding="utf-8")
    for model in (BankFile, ConceptQuestion, WrongAnswer):
        for name in model.model_fields:
            assert f"`{name}`" in doc, name


# --- issue 23: the concept cards on what follows one attention layer ----------------------------------------------

#: The cards issue 23 (item 7) asks for, and the topic each is asked under.
ISSUE_23 = {"rmsnorm": "rmsnorm", "pre-norm-warmup": "layer-norm", "paged-attention": "paged-attention",
            "continuous-batching": "continuous-batching", "mla": "mla", "sliding-window": "sliding-window",
            "attention-sinks": "attention-sinks", "linear-attention": "linear-attention",
            "flash-attention-2-3": "flash-attention", "speculative-tree-mask": "speculative-decoding",
            "kv-cache-quantization": "kv-quantization", "rope-context-extension": "rope-scaling"}


def test_every_card_of_issue_23_is_in_the_bank_under_its_topic_with_sources():
    bank = load()
    for qid, topic in ISSUE_23.items():
        c = bank.get(qid)
        assert c.topic == topic and c.q.sources and c.q.follow_ups and "zh" in c.q.translations, qid
        assert all(f in {x.id for x in bank.concepts} for f in c.q.follow_ups)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_drill_concepts_asks_each_card_of_issue_23_by_its_topic(cli, lang):
    bank = load()
    for qid, topic in ISSUE_23.items():
        n = sum(c.topic == topic for c in bank.concepts)
        code, out, err = cli("drill", "concepts", "--topic", topic, "--count", 40, "--seed", 0, "--show-answers",
                             "--format", "json", "--lang", lang)
        assert code == 0, err
        asked = {q["id"]: q for q in json.loads(out)["questions"]}
        assert qid in asked and len(asked) >= n, (qid, topic)  # every question of the topic is asked
        words = bank.get(qid).q.in_language(lang)
        assert asked[qid]["question"] == words.question and asked[qid]["key_points"] == list(words.key_points)


def test_the_chinese_of_each_card_of_issue_23_states_the_numbers_of_its_english():
    """A translation that drops or changes a number is caught: the numbers of each model answer and key point, in
    English and in Chinese, are the same (as multisets; "about 131K" and "约为 131K" alike)."""
    import re
    from collections import Counter

    def numbers(text: str) -> Counter:
        text = re.sub(r"(\d+) million", lambda m: str(int(m[1]) * 10**6), text)  # "4 million" is "400 万"
        text = re.sub(r"(\d+) ?万", lambda m: str(int(m[1]) * 10**4), text)
        return Counter(re.findall(r"\d+(?:[.,]\d+)*", text.replace(",", "")))

    bank = load()
    for qid in ISSUE_23:
        q = bank.get(qid).q
        zh = q.translations["zh"]
        assert numbers(q.model_answer) == numbers(zh.model_answer), qid
        assert numbers(q.short_answer) == numbers(zh.short_answer), qid
        for en_point, zh_point in zip(q.key_points, zh.key_points, strict=True):
            assert numbers(en_point) == numbers(zh_point), (qid, en_point)
        for en_wrong, zh_wrong in zip(q.wrong_answers, zh.wrong_answers, strict=True):
            assert numbers(en_wrong.answer + " " + en_wrong.why) == numbers(zh_wrong.answer + " " + zh_wrong.why), qid
