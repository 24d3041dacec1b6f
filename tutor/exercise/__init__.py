"""The exercise: the validated record every engine computes on (exact
Fractions), the file format (a pydantic schema, the checks across fields,
format v2's grouped K/V heads, KV cache, causal alignment and bias), the one
loader that reports every problem at its place (YAML read with positions,
``safe_load`` semantics), and where exercises come from: the bundled folder,
packs, a path.

* :mod:`.record` -- :class:`Exercise` and :class:`Head`, the validated
  exercise every engine and renderer computes on (pure data; no pydantic);
* :mod:`.schema` -- the file format as a pydantic schema, every entry read
  exactly (:class:`ExerciseFile`, :func:`json_schema`);
* :mod:`.sizes` -- every size decided by the fields that agree on it;
* :mod:`.checks` -- the two forms, the shapes that must chain, the limits;
* :mod:`.load` -- the one loader: every problem of a file at its place
  (:func:`validate_file`, :func:`load_exercise`, …).

The record's names are imported here at once; the loader's on first use, so
that the engines, which import the record, never load pydantic or the YAML
reader (``tutor.exercise.record`` imports neither).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .record import BoolMatrix, Exercise, Head, MaskKind, Matrix, Vector, causal, shape, transpose

if TYPE_CHECKING:
    from .checks import LIMITS
    from .load import (
        Validation,
        check_document,
        exercise_from_data,
        exercise_problems,
        load_exercise,
        parse_exercise,
        unknown_field,
        validate_document,
        validate_file,
        validate_text,
    )
    from .schema import (
        MAX_DENOMINATOR,
        MAX_DENOMINATOR_DIGITS,
        MAX_ENTRY_CHARS,
        MAX_EXPONENT,
        MAX_MAGNITUDE,
        MINUS_SIGN,
        RADIX,
        SEXAGESIMAL,
        YAML11_BOOL,
        ExerciseFile,
        HeadBlock,
        json_schema,
        parse_entry,
    )

#: The loader's public names, by the module each lives in (imported on first use).
_LAZY_MODULES = {
    "checks": ("LIMITS",),
    "load": ("Validation", "check_document", "exercise_from_data", "exercise_problems", "load_exercise",
             "parse_exercise", "unknown_field", "validate_document", "validate_file", "validate_text"),
    "schema": ("MAX_DENOMINATOR", "MAX_DENOMINATOR_DIGITS", "MAX_ENTRY_CHARS", "MAX_EXPONENT", "MAX_MAGNITUDE",
               "MINUS_SIGN", "RADIX", "SEXAGESIMAL", "YAML11_BOOL", "ExerciseFile", "HeadBlock", "json_schema",
               "parse_entry"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

__all__ = [
    "LIMITS",
    "MAX_DENOMINATOR",
    "MAX_DENOMINATOR_DIGITS",
    "MAX_ENTRY_CHARS",
    "MAX_EXPONENT",
    "MAX_MAGNITUDE",
    "MINUS_SIGN",
    "RADIX",
    "SEXAGESIMAL",
    "YAML11_BOOL",
    "BoolMatrix",
    "Exercise",
    "ExerciseFile",
    "Head",
    "HeadBlock",
    "MaskKind",
    "Matrix",
    "Validation",
    "Vector",
    "causal",
    "check_document",
    "exercise_from_data",
    "exercise_problems",
    "json_schema",
    "load_exercise",
    "parse_entry",
    "parse_exercise",
    "shape",
    "transpose",
    "unknown_field",
    "validate_document",
    "validate_file",
    "validate_text",
]


def __getattr__(name: str) -> Any:
    """A loader name, imported from its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
