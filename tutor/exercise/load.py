"""Loading an exercise file: every problem, each at its place, and the exercise when there is none.

Loading goes in three passes, each collecting *every* problem it finds, each
with file, line, column and field, and all three run on whatever the earlier
ones left valid, so one run reports every mistake (:func:`validate_document`):

1. :func:`tutor.exercise.yamlread.parse_yaml` - YAML syntax and YAML traps;
2. :class:`.schema.ExerciseFile` (pydantic, ``extra="forbid"``) - fields and
   entry types; when it fails, each field is validated on its own
   (:func:`partial`), and a key that only looks like a field (a Cyrillic
   ``х``, a zero-width space) is named with its code points, once;
3. :func:`.checks.check_fields` - the two forms, shapes that must chain,
   and the limits, on the fields that are valid.

The result is a :class:`.record.Exercise` with exact ``Fraction`` entries.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

from tutor.base.errors import ExerciseError, Problem
from tutor.base.messages import t
from tutor.exercise.yamlread import Document, Path, ascii_look_alike, codepoints, describe, parse_yaml, read_text, shown

from . import block, mla, rope, v2
from .checks import check_fields
from .record import Exercise
from .schema import (
    YAML11_BOOL,
    CacheBlock,
    ExerciseFile,
    HeadBlock,
    KVHeadBlock,
    LatentBlock,
    LatentHeadBlock,
    MaskName,
    RopeBlock,
    WindowMask,
)

_MATRIX_FIELDS = {"x", "x_kv", "w_q", "w_k", "w_v", "w_o", "mask", "attn_bias", "k", "v"}
_FIELD_NAMES = {"": set(ExerciseFile.model_fields), "heads": set(HeadBlock.model_fields),
                "kv_heads": set(KVHeadBlock.model_fields), "cache": set(CacheBlock.model_fields),
                "mask": set(WindowMask.model_fields)}  # issue 23: mask: {sliding_window: W, sinks: S}


def _names(path: Path) -> set[str]:
    """The field names known where ``path`` points: a head's, a K/V head's, a cache entry's, mla's or one of its
    heads', or the top level's."""
    if path[:1] == ("mla",) and len(path) > 1:
        return set(LatentHeadBlock.model_fields) if len(path) > 3 and path[1] == "heads" else set(LatentBlock.model_fields)
    return _FIELD_NAMES.get(str(path[0]) if len(path) > 1 else "", _FIELD_NAMES[""])


# --- pydantic errors -> problems --------------------------------------------


_VECTOR_ENTRIES = {"b_q": "expected.number", "b_k": "expected.number", "b_v": "expected.number",
                   "b_o": "expected.number", "key_padding": "expected.boolean", "key_padding_mask": "expected.boolean",
                   "tokens": "expected.text", "kv_tokens": "expected.text", "tags": "expected.text"}


# --- issue 23: v3 fields that are a choice of words or one mapping say what THEY expect (not the mask's list)
#: field name -> (its "expected" key, its values); the values are the schema's own Literal
_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "norm": ("expected.norm", get_args(get_args(ExerciseFile.model_fields["norm"].annotation)[0])),
    "norm_placement": ("expected.norm_placement",
                       get_args(get_args(ExerciseFile.model_fields["norm_placement"].annotation)[0])),
    "pairing": ("expected.rope_pairing", get_args(RopeBlock.model_fields["pairing"].annotation)),
}
#: a top-level field that is one mapping -> its "expected" key
_MAPPINGS = {"rope": "expected.rope_block", "mla": "expected.mla_block"}


def _expected_for(path: Path) -> str:
    """What the value at ``path`` must be: a matrix, a row, an entry of a matrix or a vector, a mapping, a list."""
    names = [p for p in path if isinstance(p, str)]
    name = names[-1] if names else ""
    if path in (("rope",), ("mla",)):
        return t(_MAPPINGS[str(path[0])])
    depth = len(path) - (max(i for i, p in enumerate(path) if isinstance(p, str)) + 1) if names else 0
    if name in _MATRIX_FIELDS:
        if depth >= 2:  # an entry
            return t("expected.boolean") if name == "mask" else t("expected.number")
        return t("expected.matrix") if depth == 0 else t("expected.row")
    if name in _VECTOR_ENTRIES and depth >= 1:
        return t(_VECTOR_ENTRIES[name])
    if name in ("heads", "kv_heads", "cache") and depth == 1 or not path:  # a list of mappings: {w_k, w_v}, {k, v}
        return t("expected.mapping")
    if name == "translations" or "translations" in names:  # {zh: {title, description}}: mappings, then text
        return t("expected.text") if name in ("title", "description") else t("expected.translations")
    return t("expected.list")


def _clean(loc: tuple[Any, ...]) -> Path:
    """A pydantic location without the discriminator tags (``#name``/``#matrix``)."""
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith("#")))


def _related(path: Path, poisoned: set[Path]) -> bool:
    """True when ``path`` is at, below, or (not the top level) above a value a YAML problem replaced."""
    for q in poisoned:
        if path[: len(q)] == q or (path and q[: len(path)] == path):
            return True
    return False


def _meant(err: ValidationError, data: Any) -> dict[Path, Path]:
    """Unknown keys that only look like a known field the mapping lacks: ``{key path: field path}``.

    ``x`` written with a Cyrillic ``х``, or ``title`` with a zero-width
    space: the mistake is reported once, at the unknown key (with the code
    points and "did you mean"), not a second time as a missing field or a
    missing form.  (A misspelling such as ``titel`` is only a guess, and its
    missing field is still reported.)
    """
    out: dict[Path, Path] = {}
    for e in err.errors():
        path = _clean(e["loc"])
        if e["type"] != "extra_forbidden" or not path:
            continue
        known = _names(path)
        suggestion = ascii_look_alike(str(path[-1]))
        if suggestion not in known or suggestion == path[-1]:
            continue
        parent: Any = data
        for part in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.get(part)
            elif isinstance(parent, list) and isinstance(part, int) and part < len(parent):
                parent = parent[part]
            else:
                parent = None
        if not isinstance(parent, dict) or suggestion in parent:
            continue
        if len(path) == 1 and _other_form(suggestion, parent):
            continue  # 'wq' beside heads: not the fused form's w_q, which would make the file mix both forms
        out[path] = path[:-1] + (suggestion,)
    return out


_FUSED = {"num_heads", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v"}


def _other_form(name: str, data: dict[str, Any]) -> bool:
    """True when top-level field ``name`` belongs to the other form than the one ``data`` uses."""
    if name in _FUSED:
        return "heads" in data
    return name == "heads" and any(k in data for k in _FUSED)


def _problems_from(err: ValidationError, doc: Document, meant: dict[Path, Path] | None = None) -> list[Problem]:
    problems = []
    standing_in = set((meant or {}).values())
    for e in err.errors():
        path = _clean(e["loc"])
        kind = e["type"]
        if doc.poisoned and _related(path, doc.poisoned):
            continue  # already reported by the YAML pass (a tag, a recursive alias, too deep)
        if kind == "missing" and path[:-1] in doc.merged:
            continue  # probably meant to come from the (reported) merge key
        if kind == "missing" and path in standing_in:
            continue  # an unknown key stands for it: reported there, with "did you mean"
        if kind == "tutor":
            problems.append(doc.problem(path, e["ctx"]["message"], e["ctx"].get("hint", "")))
        elif kind == "missing":
            problems.append(doc.problem(path, t("schema.required"), t("schema.required.hint")))
        elif kind == "extra_forbidden":
            problems.append(doc.problem(path, *unknown_field(str(path[-1]), _names(path)),
                                        key=True))
        elif kind == "too_short":
            problems.append(doc.problem(path, t("schema.empty_list"), t("schema.empty_list.hint", item=_expected_for(path + (0,)))))
        elif kind == "literal_error" and path and path[-1] in _CHOICES:  # issue 23: norm, norm_placement, rope.pairing
            found = e["input"]
            key, values = _CHOICES[str(path[-1])]
            near = _suggest(found.strip().lower(), set(values)) if isinstance(found, str) else None
            hint = t("schema.unknown.hint", suggestion=near) if near else ""
            problems.append(doc.problem(path, t("schema.expected", expected=t(key), found=describe(found)), hint))
        elif kind == "literal_error":
            found = e["input"]
            hint = t("hint.yaml11_mask", text=found) if isinstance(found, str) and found.lower() in YAML11_BOOL else ""
            if not hint and isinstance(found, str) and (near := _suggest(found.strip().lower(), set(get_args(MaskName)))):
                hint = t("schema.unknown.hint", suggestion=near)  # mask: casual -> did you mean 'causal'?
            expected = t("expected.mask", window="{sliding_window: W, sinks: S}")  # the YAML form: code, not words
            problems.append(doc.problem(path, t("schema.expected", expected=expected, found=describe(found)), hint))
        else:  # list_type, model_type, dict_type, ...
            problems.append(doc.problem(path, t("schema.expected", expected=_expected_for(path), found=describe(e["input"]))))
    return problems


def _suggest(key: str, known: set[str]) -> str | None:
    """The known field ``key`` probably stands for: its look-alike ASCII spelling, else the closest name."""
    looks = ascii_look_alike(key)
    if looks in known:
        return looks
    close = difflib.get_close_matches(looks, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_field(key: str, known: set[str] | list[str]) -> tuple[str, str]:
    """The message and hint for an unknown key: the closest known name, and the code points of any
    invisible or look-alike character in it (``'x\\u200b'``: U+200B ZERO WIDTH SPACE) that explain the error."""
    names = codepoints(key)
    close = _suggest(key, set(known))
    hint = t("schema.unknown.hint", suggestion=close) if close else t("schema.unknown.hint.none")
    message = t("schema.unknown.codepoints", name=shown(key), names=names) if names else t("schema.unknown")
    return message, hint


# --- the valid part of an invalid file --------------------------------------


@functools.cache
def _adapter(cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = cls.model_fields[name]
    annotation: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    return TypeAdapter(annotation)


def _fields(cls: type[BaseModel], data: dict[str, Any], base: Path, bad: set[Path]) -> SimpleNamespace:
    """Each field of ``cls`` validated on its own: a valid value, its default when absent, else ``None`` (path in ``bad``)."""
    out = SimpleNamespace()
    for name, info in cls.model_fields.items():
        if name not in data:
            if info.is_required():
                bad.add(base + (name,))
            setattr(out, name, None if info.is_required() else info.get_default(call_default_factory=True))
            continue
        try:
            setattr(out, name, _adapter(cls, name).validate_python(data[name]))
        except ValidationError:
            setattr(out, name, None)
            bad.add(base + (name,))
    return out


def partial(data: dict[str, Any]) -> tuple[SimpleNamespace, set[Path]]:
    """The fields of an invalid exercise that are valid, so the cross-field checks can run on them.

    A field that is invalid or missing is ``None`` and its path is in the
    returned set; a head of the per-head form is checked field by field too
    (an invalid head is ``None``).
    """
    bad: set[Path] = set()
    f = _fields(ExerciseFile, data, (), bad)
    raw = data.get("heads")
    if ("heads",) in bad and isinstance(raw, list) and raw:
        bad.discard(("heads",))
        heads: list[SimpleNamespace | None] = []
        for i, h in enumerate(raw):
            if isinstance(h, dict):
                heads.append(_fields(HeadBlock, h, ("heads", i), bad))
            else:
                heads.append(None)
                bad.add(("heads", i))
        f.heads = heads
    return f, bad


# --- public entry points ----------------------------------------------------


@dataclass(frozen=True)
class Validation:
    """Everything found in one exercise file: its problems, its warnings, and the exercise when there are no problems.

    Problems are in file order.  Warnings (a leading zero, ``010``) do not
    stop a file from loading.
    """

    file: str
    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...] = ()
    exercise: Exercise | None = None

    @property
    def ok(self) -> bool:
        """True when the file is a valid exercise (warnings allowed)."""
        return self.exercise is not None


def _in_file_order(problems: list[Problem]) -> tuple[Problem, ...]:
    unique = list(dict.fromkeys(problems))
    return tuple(sorted(unique, key=lambda p: (p.line is None, p.line or 0, p.column or 0)))


def validate_document(doc: Document) -> Validation:
    """Every problem of a parsed document at once: YAML, fields and entries, then shapes and limits.

    Shapes and limits are checked on the fields that are valid even when
    others are not, so one pass reports every mistake, each once.  A document
    without a value (a syntax error, a refused alias expansion) has only its
    YAML problems.
    """
    problems = list(doc.problems)
    warnings = tuple(doc.warnings)  # the checks below may add notes: read again after them
    if doc.value is None:
        if not problems:
            problems.append(Problem(doc.filename, 1, 1, "", t("yaml.empty"), t("yaml.empty.hint")))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    if not isinstance(doc.value, dict):
        problems.append(doc.problem((), t("yaml.top_level", found=describe(doc.value)), t("yaml.top_level.hint")))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    if "exercise" in doc.value and "id" not in doc.value and "x" not in doc.value:  # a solution file, given by mistake
        problems.append(doc.problem(("exercise",), t("exercise.is_solution"), t("exercise.is_solution.hint", file=doc.filename),
                                    key=True))
        return Validation(doc.filename, _in_file_order(problems), warnings)
    try:
        f: Any = ExerciseFile.model_validate(doc.value)
        bad: set[Path] = set()
    except ValidationError as err:
        meant = _meant(err, doc.value)
        problems += _problems_from(err, doc, meant)
        f, bad = partial(doc.value)
        bad |= set(meant.values())  # a field an unknown key stands for is reported there: no checks need it
    f, latent, latent_problems = mla.prepare(f, doc, bad)  # format v3's mla: each head's K/V weights its products
    f, state = v2.prepare(f, doc, bad)  # format v2: its fields checked, and the view the v1 checks take
    block_problems = block.check(f, doc, bad)  # issue 23: the pre-norm block's fields
    found, ex = check_fields(f, doc, bad)
    problems += latent_problems + state.problems + found + block_problems
    ex = v2.finish(ex, state) if ex is not None and not state.problems else None
    ex = mla.finish(ex, latent) if ex is not None and not latent_problems else None
    if ex is not None and not block_problems:
        found, ex = block.finish(ex, f, doc)
        problems += found
    if ex is not None:
        problems += v2.derived(ex, doc)
    if ex is not None and getattr(f, "rope", None) is not None:  # format v3: RoPE (issue 23)
        found, ex = rope.finish(ex, f, doc)
        problems += found
    warnings = tuple(doc.warnings)
    if problems:  # a warning on a value that is an error anyway (1e20 refused: no use writing it out) goes
        refused = {(p.line, p.column) for p in problems}
        warnings = tuple(w for w in warnings if (w.line, w.column) not in refused)
        return Validation(doc.filename, _in_file_order(problems), warnings)
    if ex is not None and ex.mask_kind == "causal" and ex.is_cross:  # valid, but no model runs it (issue 10)
        warnings += (doc.problem(("mask",), t("mask.causal_cross"), t("mask.causal_cross.hint")),)
    return Validation(doc.filename, (), warnings, ex)


def validate_text(text: str, filename: str = "<text>") -> Validation:
    """:func:`validate_document` of YAML text; never raises for bad input."""
    return validate_document(parse_yaml(text, filename))


def validate_file(path: str, display: str | None = None) -> Validation:
    """Read and validate one file; never raises for bad input (an unreadable file is a problem)."""
    name = display or str(path)
    text, problems = read_text(path, display)
    if text is None:
        return Validation(name, tuple(problems))
    return validate_text(text, name)


def check_document(doc: Document) -> tuple[list[Problem], Exercise | None]:
    """All problems of a parsed document, and the exercise when there are none."""
    v = validate_document(doc)
    return list(v.problems), v.exercise


def parse_exercise(text: str, filename: str = "<text>") -> Exercise:
    """Parse exercise YAML text.  Raises :class:`ExerciseError` listing every problem."""
    problems, ex = check_document(parse_yaml(text, filename))
    if ex is None:
        raise ExerciseError(problems)
    return ex


def exercise_problems(path: str, display: str | None = None) -> tuple[list[Problem], Exercise | None]:
    """Read and check one file; never raises for bad input."""
    v = validate_file(path, display)
    return list(v.problems), v.exercise


def load_exercise(path: str, display: str | None = None) -> Exercise:
    """Load one exercise file.  Raises :class:`ExerciseError` listing every problem."""
    problems, ex = exercise_problems(path, display)
    if ex is None:
        raise ExerciseError(problems)
    return ex


def exercise_from_data(data: dict[str, Any], filename: str = "<data>") -> Exercise:
    """Build an exercise from already-loaded data (Python values); for programs and tests."""
    problems, ex = check_document(Document(filename, value=data))
    if ex is None:
        raise ExerciseError(problems)
    return ex

