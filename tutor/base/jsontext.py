"""The one JSON writer: every ``--format json`` document, every JSON file attn-tutor writes.

Objects are indented one space a level; a list of numbers or strings stays
on one line, and a matrix (a list of such lists) gets one row per line, so a
document reads like the tables it stands for.  ASCII only: anything else is
escaped, so the text is safe on any stream.  A sentence the engines left as a
key and its fields (:class:`~tutor.base.messages.Msg`) is written in the
language in use.  Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from .messages import Msg


def _words(obj: object) -> str:
    """A sentence not yet in words, in words; anything else JSON cannot hold is a bug (``TypeError``)."""
    if isinstance(obj, Msg):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def compact(obj: Any, indent: int = 0) -> str:
    """``obj`` as JSON text, laid out as the module docstring says (no trailing newline)."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict) and obj:
        items = (f"{inner}{json.dumps(k, default=_words)}: {compact(v, indent + 1)}" for k, v in obj.items())
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], (dict, list, tuple)):
        if isinstance(obj[0], (list, tuple)) and not (obj[0] and isinstance(obj[0][0], (dict, list, tuple))):  # a matrix
            rows = json.dumps(obj, default=_words)[1:-1].replace("], [", "],\n" + inner + "[")  # one encoder call per matrix
            return "[\n" + inner + rows + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + compact(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, default=_words)


def document(obj: Any) -> str:
    """A whole JSON document: :func:`compact` text ending in a newline."""
    return compact(obj) + "\n"
