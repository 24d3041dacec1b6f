"""The concept bank: questions with key points, a model answer, wrong answers and follow-ups, as YAML.

A bank is a folder of YAML files (the bundled one is ``tutor/drills/concepts/``;
an instructor's is given with ``drill concepts --bank DIR``, beside it); the
format is documented in ``docs/concept-bank.md``.  One file::

    topic: scaling                      # the topic of its questions (each may name its own)
    questions:
      - id: why-scale
        question: Why are the scores divided by the square root of d_k?
        key_points: [..., ...]          # what a strong answer must hit (2 to 8)
        model_answer: ...               # a full answer, in this project's words
        short_answer: ...               # one line: the answer in brief (the interview outline's last line)
        choice_answer: ...              # optional: the right option of --mode choice, a short claim as long as
                                        # the wrong answers (else short_answer; length must not give it away)
        wrong_answers:                  # common wrong answers (at least 2): the other options
          - {answer: ..., why: ...}
        follow_ups: [scale-saturation]  # ids asked next, in order (the chain)
        claims: [qk-variance]           # numeric claims of the model answer, each measured by a test
        sources: [...]                  # papers or docs the answer rests on
        translations:                   # the question's words in another language (zh), optional
          zh: {question: ..., key_points: [...], model_answer: ..., short_answer: ..., wrong_answers: [...]}

Loading goes as for exercises: :func:`tutor.exercise.yamlread.parse_yaml` (safe,
YAML 1.2, with positions), then the pydantic model (``extra="forbid"``), then
the checks across files (an id given twice, a follow-up naming no question,
a question without a topic).  Every problem is a
:class:`tutor.base.errors.Problem` at its file, line and column; nothing in a
file is evaluated as code, and its text reaches a terminal only escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError
from pydantic_core import PydanticCustomError

from ..base.cjk import join_lines
from ..base.errors import Problem, TutorError
from ..base.messages import LANGUAGES, t
from ..exercise.load import Validation

BUNDLED = Path(__file__).resolve().parent / "concepts"
MAX_TEXT = 4000  # characters in one text field
MAX_QUESTIONS = 1000  # in one file


class BankError(TutorError):
    """A concept bank cannot be used; holds every problem found (each an ``error:`` line, exit code 2)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def _fail(expected: str, found: Any) -> PydanticCustomError:
    from ..exercise.yamlread import describe

    return PydanticCustomError("tutor", "{message}", {"message": t("schema.expected", expected=expected,
                                                                   found=describe(found))})


def _text(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        if len(value) > MAX_TEXT:
            raise PydanticCustomError("tutor", "{message}", {"message": t("bank.too_long", limit=MAX_TEXT)})
        return join_lines(value.split()) if "\n\n" not in value else "\n\n".join(
            join_lines(p.split()) for p in value.strip().split("\n\n"))
    raise _fail(t("expected.text"), value)


def _slug(value: Any) -> str:
    import re

    if isinstance(value, str) and re.fullmatch(r"[a-z0-9][a-z0-9-]*", value) and len(value) <= 64:
        return str(value)
    raise _fail(t("expected.slug"), value)


Text = Annotated[str, PlainValidator(_text)]
Slug = Annotated[str, PlainValidator(_slug)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WrongAnswer(_Strict):
    """A common wrong answer and why it is wrong."""

    answer: Text
    why: Text


class QuestionWords(_Strict):
    """A question's words in another language (``translations: {zh: ...}``): the same fields as its
    English, with as many key points and wrong answers, in the same order."""

    question: Text
    key_points: Annotated[list[Text], Field(min_length=2, max_length=8)]
    model_answer: Text
    short_answer: Text
    choice_answer: Text | None = None
    wrong_answers: Annotated[list[WrongAnswer], Field(min_length=2, max_length=8)]


class ConceptQuestion(_Strict):
    """One question of the bank (see the module docstring for each field)."""

    id: Slug
    topic: Slug | None = None
    question: Text
    key_points: Annotated[list[Text], Field(min_length=2, max_length=8)]
    model_answer: Text
    short_answer: Text
    #: the right option of ``--mode choice``, a short claim of the wrong answers' kind and length (rope trial
    #: F15: the short answer was the longest option in every question, so length alone gave it away)
    choice_answer: Text | None = None
    wrong_answers: Annotated[list[WrongAnswer], Field(min_length=2, max_length=8)]
    follow_ups: list[Slug] = []
    claims: list[Slug] = []
    sources: list[Text] = []
    translations: dict[Slug, QuestionWords] = {}

    def in_language(self, lang: str) -> ConceptQuestion:
        """This question with its words in ``lang`` (its ``translations``), else as written (English)."""
        words = self.translations.get(lang)
        return self if words is None else self.model_copy(update=dict(words))


class FileWords(_Strict):
    """A bank file's title in another language."""

    title: Text | None = None


class BankFile(_Strict):
    """One file of a bank: a default ``topic`` and its questions."""

    topic: Slug | None = None
    title: Text | None = None
    translations: dict[Slug, FileWords] = {}
    questions: Annotated[list[ConceptQuestion], Field(min_length=1, max_length=MAX_QUESTIONS)]


@dataclass(frozen=True)
class Concept:
    """A question of a loaded bank: its record, its topic (its own or its file's), and where it came from."""

    q: ConceptQuestion
    topic: str
    file: str
    source: str  # "bundled" or the folder as given

    @property
    def id(self) -> str:
        return self.q.id


@dataclass(frozen=True)
class Bank:
    """The questions of every file loaded, in file order; ids are unique and every follow-up exists."""

    concepts: tuple[Concept, ...]

    def get(self, qid: str) -> Concept:
        """The question called ``qid``; ``KeyError`` when there is none."""
        for c in self.concepts:
            if c.id == qid:
                return c
        raise KeyError(qid)

    @property
    def topics(self) -> list[str]:
        """Every topic, in the order first met."""
        return list(dict.fromkeys(c.topic for c in self.concepts))


def is_bank_document(value: object) -> bool:
    """True when a parsed YAML document is a concept bank file (a mapping with ``questions``), not an exercise."""
    return isinstance(value, dict) and "questions" in value


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    """One file read: its name as reported, where it comes from, its record and its parsed document."""

    name: str
    source: str
    record: BankFile
    doc: Any  # tutor.exercise.yamlread.Document: the positions of its values


def read_file(file: Path, display: str | None = None) -> tuple[list[Problem], BankFile | None]:
    """Every problem of one bank file (YAML, then fields), and the file's record when there is none."""
    problems, read = _read(file, display or str(file), "file")
    return problems, None if read is None else read.record


def _read(file: Path, name: str, source: str) -> tuple[list[Problem], _Read | None]:
    from ..exercise.yamlread import parse_yaml, read_text

    text, problems = read_text(str(file), name)
    if text is None:
        return _of_a_bank(problems), None
    doc = parse_yaml(text, name)
    if doc.problems:
        return _of_a_bank(doc.problems), None
    if not isinstance(doc.value, dict):
        return [doc.problem((), t("bank.not_mapping"), t("bank.not_mapping.hint"))], None
    try:
        return [], _Read(name, source, BankFile.model_validate(doc.value), doc)
    except ValidationError as err:
        return _problems(err, doc), None


def _of_a_bank(problems: Sequence[Problem]) -> list[Problem]:
    """The reading's problems, their hints about a bank file where the YAML reader's speak of an exercise
    (issue 20, E: an empty bank file was told what an exercise needs)."""
    from dataclasses import replace

    said = {t(key): t(f"bank.{key}") for key in ("yaml.empty.hint", "yaml.key_type.hint", "yaml.too_deep.hint",
                                                  "yaml.merge_key.hint", "yaml.top_level.hint")}
    return [replace(p, hint=said.get(str(p.hint), p.hint)) for p in problems]


def _problems(err: ValidationError, doc: Any) -> list[Problem]:
    from ..exercise.load import unknown_field
    from ..exercise.yamlread import describe

    known = {"": set(BankFile.model_fields), "questions": set(ConceptQuestion.model_fields),
             "wrong_answers": set(WrongAnswer.model_fields)}
    out = []
    for e in err.errors():
        path = tuple(e["loc"])
        kind = e["type"]
        if kind == "tutor":
            out.append(doc.problem(path, e["ctx"]["message"]))
        elif kind == "missing":
            where = [p for p in path[:-1] if isinstance(p, str)]  # the file's own field, or a question's, an answer's
            hint = {"": "bank.required.file.hint", "wrong_answers": "bank.required.wrong.hint"}.get(
                where[-1] if where else "", "bank.required.hint")
            out.append(doc.problem(path, t("schema.required"), t(hint, field=path[-1])))
        elif kind == "extra_forbidden":
            names = [p for p in path[:-1] if isinstance(p, str)]
            if "translations" in names:  # a translation's words: a question's, or the file's title
                fields = set(QuestionWords.model_fields) if "questions" in names else set(FileWords.model_fields)
            else:
                fields = known[names[-1] if names else ""]
            message, hint = unknown_field(str(path[-1]), fields)
            if hint == t("schema.unknown.hint.none"):  # that one points at the exercise schema
                hint = t("bank.unknown.hint")
            out.append(doc.problem(path, message, hint, key=True))
        elif kind == "too_short":
            out.append(doc.problem(path, t("bank.too_few", field=path[-1], n=_MIN_LENGTH.get(str(path[-1]), 1))))
        elif kind == "too_long":
            out.append(doc.problem(path, t("bank.too_many", field=path[-1])))
        elif kind in ("list_type", "model_type", "dict_type"):
            expected = t("expected.list") if kind == "list_type" else t("expected.mapping")
            out.append(doc.problem(path, t("schema.expected", expected=expected, found=describe(e["input"]))))
        else:  # pragma: no cover - every field has a validator above
            out.append(doc.problem(path, str(e["msg"])))
    return out


_MIN_LENGTH = {"key_points": 2, "wrong_answers": 2, "questions": 1}


def bank_files(folder: Path) -> list[Path]:
    """The YAML files below ``folder`` (as packs are read: hidden files and folders skipped)."""
    from ..exercise.catalog import yaml_files

    return yaml_files(folder)


def _check(files: Iterable[_Read], elsewhere: dict[str, str] | None = None) -> tuple[list[Problem], list[Concept]]:
    """The checks across files: ids unique (also against ``elsewhere``: id -> the file that has it), a topic
    for every question, follow-ups that name a question (here or ``elsewhere``) other than their own."""
    problems: list[Problem] = []
    concepts: list[Concept] = []
    first: dict[str, str] = dict(elsewhere or {})
    where: dict[str, tuple[Any, int]] = {}
    for read in files:
        for i, q in enumerate(read.record.questions):
            topic = q.topic or read.record.topic
            if topic is None:
                problems.append(read.doc.problem(("questions", i), t("bank.no_topic", id=q.id), t("bank.no_topic.hint")))
                continue
            if q.id in first:
                before = first[q.id]
                if q.id in where and where[q.id][0] is read.doc:  # in this file: say where
                    line, _ = read.doc.where(("questions", where[q.id][1], "id"))
                    if line is not None:
                        before = t("bank.duplicate.here", line=line)
                problems.append(read.doc.problem(("questions", i, "id"), t("bank.duplicate", id=q.id, first=before)))
                continue
            first[q.id] = read.name
            where[q.id] = (read.doc, i)
            concepts.append(Concept(q, topic, read.name, read.source))
            problems += _translation_problems(read, i, q)
        for lang in read.record.translations:
            if lang not in LANGUAGES or lang == "en":
                problems.append(read.doc.problem(("translations", lang), t("bank.translation.language", lang=lang,
                                                                              languages=", ".join(LANGUAGES))))
    for c in concepts:
        doc, i = where[c.id]
        for n, f in enumerate(c.q.follow_ups):
            path = ("questions", i, "follow_ups", n)
            if f == c.id:
                problems.append(doc.problem(path, t("bank.self_follow_up", id=c.id)))
            elif f not in first:
                problems.append(doc.problem(path, t("bank.unknown_follow_up", id=f, question=c.id)))
    return problems, concepts


def _translation_problems(read: _Read, i: int, q: ConceptQuestion) -> list[Problem]:
    """The problems of question ``i``'s translations: a language attn-tutor does not speak (or English
    itself), a count of key points or wrong answers that is not its English's."""
    out: list[Problem] = []
    for lang, words in q.translations.items():
        path: tuple[Any, ...] = ("questions", i, "translations", lang)
        if lang not in LANGUAGES or lang == "en":
            out.append(read.doc.problem(path, t("bank.translation.language", lang=lang, languages=", ".join(LANGUAGES))))
            continue
        for field, theirs, ours in (("key_points", words.key_points, q.key_points),
                                    ("wrong_answers", words.wrong_answers, q.wrong_answers)):
            if len(theirs) != len(ours):
                out.append(read.doc.problem((*path, field), t("bank.translation.count", field=field, found=len(theirs),
                                                                  expected=len(ours))))
        if (words.choice_answer is None) != (q.choice_answer is None):  # one language's options would give it away
            out.append(read.doc.problem(path, t("bank.translation.choice_answer")))
    return out


def load(folders: Sequence[Path] = (), *, bundled: bool = True) -> Bank:
    """The bundled bank and those of ``folders``, checked; :class:`BankError` listing every problem otherwise.

    A folder with no YAML file, or one that does not exist, is a problem too.
    """
    places: list[tuple[Path, str]] = ([(BUNDLED, "bundled")] if bundled else []) + [(Path(f), str(f)) for f in folders]
    problems: list[Problem] = []
    reads: list[_Read] = []
    for folder, source in places:
        if not folder.is_dir():
            problems.append(Problem(str(folder), None, None, "", t("bank.no_folder")))
            continue
        files = bank_files(folder)
        if not files:
            problems.append(Problem(str(folder), None, None, "", t("bank.no_files")))
        for file in files:
            found, read = _read(file, f"bundled:{file.name}" if source == "bundled" else str(file), source)
            problems += found
            if read is not None:
                reads.append(read)
    more, concepts = _check(reads)
    problems += more
    if problems:
        raise BankError(problems)
    return Bank(tuple(concepts))


def validate_file(file: Path, display: str | None = None) -> list[Problem]:
    """Every problem of one bank file on its own (``attn-tutor validate``): YAML, fields, topics, ids
    (also against the bundled bank's) and follow-ups (which may name a bundled question)."""
    import os

    problems, read = _read(file, display or str(file), "file")
    if read is None:
        return problems
    mine = os.path.realpath(file)
    bundled: dict[str, str] = {}
    for other in bank_files(BUNDLED):
        if os.path.realpath(other) == mine:
            continue
        _, record = read_file(other)
        for q in record.questions if record is not None else ():
            bundled.setdefault(q.id, f"bundled:{other.name}")
    more, _ = _check([read], bundled)
    return problems + more


def validation(file: Path, display: str | None = None) -> BankValidation | None:
    """``attn-tutor validate`` on a concept bank file: a :class:`tutor.exercise.Validation` whose ``ok``
    says whether the file is a valid bank (:class:`BankValidation`), or ``None`` when ``file`` is not a
    concept bank file (it has no top-level ``questions:``), so that it is validated as an exercise."""
    import re

    from ..exercise.yamlread import read_text

    text, _ = read_text(str(file), display or str(file))
    if text is None or not re.search(r"(?m)^questions\s*:", text):
        return None
    return BankValidation(display or str(file), tuple(validate_file(file, display)))


@dataclass(frozen=True)
class BankValidation(Validation):
    """The validation of a concept bank file: valid when it has no problem (it holds no exercise)."""

    @property
    def ok(self) -> bool:
        return not self.problems
