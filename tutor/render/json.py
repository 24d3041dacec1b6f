"""The worked solution as JSON (the contract's ``--format json``).

``{"exercise": {...}, "steps": [{"id", "head", "title", "formula", "shape",
"exact", "value", "why"}], "production": [...], "notes": [...]}``: exact
entries are answer-grammar strings, values are floats, and a masked score is
``"-inf"`` exactly with value ``null``.
"""

from __future__ import annotations

import math
from typing import Any

from ..exactnum import frac_text
from ..exercise.record import Exercise, Matrix, Vector
from ..jsontext import compact
from ..steps import KINDS, Solution, Step


def _m(m: Matrix | None) -> list[list[str]] | None:
    return None if m is None else [[frac_text(v) for v in row] for row in m]


def _v(v: Vector | None) -> list[str] | None:
    return None if v is None else [frac_text(x) for x in v]


def exercise_dict(ex: Exercise) -> dict[str, Any]:
    """The exercise's sizes, labels, masks and inputs (entries as exact strings)."""
    return {
        "id": ex.id,
        "title": ex.title,
        "description": ex.description,
        "source": ex.source,
        "L": ex.L,
        "L_k": ex.L_k,
        "d_model": ex.d_model,
        "num_heads": ex.num_heads,
        "d_k": ex.heads[0].d_k,
        "d_v": ex.heads[0].d_v,
        "d_out": ex.d_out,
        "tokens": list(ex.query_labels),
        "kv_tokens": list(ex.key_labels),
        "mask": ex.mask_kind,
        "key_padding": None if ex.key_padding is None else list(ex.key_padding),
        "tags": list(ex.tags),
        "difficulty": ex.difficulty,
        "x": _m(ex.x),
        "x_kv": _m(ex.x_kv),
        "heads": [
            {"w_q": _m(h.w_q), "w_k": _m(h.w_k), "w_v": _m(h.w_v), "b_q": _v(h.b_q), "b_k": _v(h.b_k), "b_v": _v(h.b_v)}
            for h in ex.heads
        ],
        "w_o": _m(ex.w_o),
        "b_o": _v(ex.b_o),
    }


def step_dict(step: Step, ex: Exercise) -> dict[str, Any]:
    """One step as JSON, with ``why``: the sentences a reader gets beside it (its kind's ``why``)."""
    return {
        "id": step.id,
        "head": step.head,
        "title": KINDS[step.id].title,
        "formula": step.formula,
        "shape": list(step.shape),
        "annotation": step.annotation(),
        "exact": [[str(e) for e in row] for row in step.exact],
        "value": [[None if math.isinf(v) else v for v in row] for row in step.value],
        "why": KINDS[step.id].why(step, ex),
    }


def solution_dict(sol: Solution, head: int | None = None) -> dict[str, Any]:
    """The document: ``exercise``, ``steps`` (each with its ``why`` sentences), ``production`` (the
    batched forward pass, each step with its ``note`` and the note's catalogue ``key``) and ``notes``
    (on the configuration: causal alignment)."""
    from ..numeric.trace import production_view

    ex = sol.exercise
    steps = [s for s in sol.steps if head is None or s.head in (head, None)]
    trace, notes = production_view(ex)
    production = [{"name": p.name, "dims": list(p.dims), "shape": list(p.shape), "note": p.note, "key": p.key}
                  for p in trace]
    return {"exercise": exercise_dict(ex), "steps": [step_dict(s, ex) for s in steps], "production": production,
            "notes": list(notes)}


def dumps(sol: Solution, head: int | None = None) -> str:
    """JSON text (ASCII-safe: non-ASCII notation is escaped)."""
    return compact(solution_dict(sol, head))
