"""Format v3's pre-norm block (issue 23): ``norm``, ``norm_eps``, ``residual``, ``norm_placement`` checked and
put in the record.

``norm: rmsnorm | layernorm`` normalizes each row of X before the
projections, with no learned scale or shift: RMSNorm ``x / sqrt(mean(x²) +
eps)`` (Zhang & Sennrich 2019, eq. 4 with ``g = 1``), LayerNorm ``(x −
mean(x)) / sqrt(var(x) + eps)`` with the population variance (Ba et al.
2016, eq. 4 without gain and bias); ``residual: true`` adds X to the layer's
output (He et al. 2016; d_out = d_model).  Each row's factor
``1/sqrt(m + eps)`` is a square root of a rational, so the exact engine
keeps it exact; :data:`MAX_ROOT` bounds the number whose square-free part it
factors.  ``norm_placement: post`` (normalize X + output, Vaswani et al.
2017's placement) needs ``residual: true`` (it is the sum that is normalized);
the projections then read X, and the entries of X + output hold
exponentials, so the root of a row's variance is kept as a factor
``1/sqrt(v)`` with ``v`` exact (:class:`tutor.exact.block.Rooted`).
The block is built for self-attention of format v1 (a cache, grouped K/V
heads, a bias, cross-attention or multi-head latent attention with a norm are
refused, each in one line: c_KV would have to be read off X_norm; so is a
residual with ``mla``: the block's run reads each head's own W_K and W_V).
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from tutor.base.errors import Problem
from tutor.base.messages import t
from tutor.exercise.yamlread import Document, Path

from . import record

#: The largest ``numerator·denominator`` of a row's mean square (plus eps) whose square root is kept exact:
#: its square-free part is found by trial division up to its square root (10^5 divisions at most).
MAX_ROOT = 10**10
#: Fields of other formats the block is not built with (the norm of X_kv, a cache's rows, a bias's scores).
_NOT_WITH = ("x_kv", "num_kv_heads", "kv_heads", "cache", "attn_bias", "alibi", "mla")


def _problem(doc: Document, path: Path, key: str, **fields: Any) -> Problem:
    try:
        hint = t(key + ".hint", **fields)
    except KeyError:
        hint = ""
    return doc.problem(path, t(key, **fields), hint)


def check(f: Any, doc: Document, bad: set[Path]) -> list[Problem]:
    """The block's fields against each other and the fields it is not built with; the paths found wrong are
    added to ``bad`` (so the exercise is not built).  ``f`` as :func:`tutor.exercise.v2.prepare` takes it."""
    found: list[tuple[Path, str, dict[str, Any]]] = []
    given = getattr(f, "norm", None) is not None or ("norm",) in bad
    eps = getattr(f, "norm_eps", None)
    if eps is not None and not given:
        found.append((("norm_eps",), "block.eps.alone", {}))
    elif eps is not None and eps < 0:
        found.append((("norm_eps",), "block.eps.negative", {"eps": str(eps)}))
    placement = getattr(f, "norm_placement", None)
    if placement is not None and not given:
        found.append((("norm_placement",), "block.placement.alone", {}))
    elif placement == "post" and not getattr(f, "residual", None):  # post-norm normalizes X + output
        found.append((("norm_placement",), "block.placement.post", {}))
    if given:
        found += [((name,), "block.not_with", {"field": name}) for name in _NOT_WITH
                  if getattr(f, name, None) is not None]
    if getattr(f, "residual", None) and getattr(f, "x_kv", None) is not None:
        found.append((("residual",), "block.residual.cross", {}))
    if getattr(f, "residual", None) and not given and getattr(f, "mla", None) is not None:  # the block's run has no latent
        found.append((("residual",), "block.residual.mla", {}))
    bad.update(path for path, _, _ in found)
    return [_problem(doc, path, key, **fields) for path, key, fields in found]


def _mean_square(ex: record.Exercise, row: record.Vector) -> Fraction:
    """What the row's factor is ``1/sqrt`` of: ``mean(x²) + eps`` (RMSNorm) or ``var(x) + eps`` (LayerNorm)."""
    n = len(row)
    if ex.norm == "layernorm":
        mean = sum(row, Fraction(0)) / n
        return sum(((x - mean) ** 2 for x in row), Fraction(0)) / n + ex.norm_eps
    return sum((x * x for x in row), Fraction(0)) / n + ex.norm_eps


def finish(ex: record.Exercise, f: Any, doc: Document) -> tuple[list[Problem], record.Exercise | None]:
    """The record with the block's fields, or the problems that stop it: a row whose mean square (variance)
    plus eps is 0 (the norm divides by 0), or too long to keep its square root exact; a residual whose
    widths differ (``d_out`` must be ``d_model``)."""
    changes: dict[str, Any] = {}
    if getattr(f, "norm", None) is not None:
        changes["norm"] = f.norm
        changes["norm_eps"] = f.norm_eps if f.norm_eps is not None else Fraction(0)
        if getattr(f, "norm_placement", None) == "post":
            changes["norm_placement"] = "post"
    if getattr(f, "residual", None):
        changes["residual"] = True
    if not changes:
        return [], ex
    ex = dataclasses.replace(ex, **changes)
    out: list[Problem] = []
    if ex.residual and ex.w_o is None:
        out.append(_problem(doc, ("residual",), "block.residual.w_o"))
    elif ex.residual and ex.d_out != ex.d_model:
        out.append(_problem(doc, ("residual",), "block.residual.width", d_model=ex.d_model, d_out=ex.d_out))
    if ex.has_norm:  # pre-norm: X's rows are normalized (post-norm's rows of X + output: solve refuses a 0)
        for i, row in enumerate(ex.x):
            m = _mean_square(ex, row)
            if m == 0:
                out.append(_problem(doc, ("x", i), f"block.row.zero.{ex.norm}", row=i + 1))
            elif m.numerator * m.denominator > MAX_ROOT:
                out.append(_problem(doc, ("x", i), f"block.row.root.{ex.norm}", row=i + 1, value=str(m)))
    return out, (None if out else ex)


def row_ok(row: Sequence[Fraction], center: bool, eps: Fraction) -> bool:
    """Whether a norm can divide ``row`` (``center``: LayerNorm) and keep its square root exact (:data:`MAX_ROOT`)."""
    if center:
        mean = sum(row, Fraction(0)) / len(row)
        m = sum(((x - mean) ** 2 for x in row), Fraction(0)) / len(row) + eps
    else:
        m = sum((x * x for x in row), Fraction(0)) / len(row) + eps
    return m != 0 and m.numerator * m.denominator <= MAX_ROOT

