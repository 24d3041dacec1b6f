"""Format v3's ``mla:``: multi-head latent attention's K/V side, checked and put in the record.

DeepSeek-AI 2024, "DeepSeek-V2", §2.1.2: keys and values are up-projected
from one latent per token, ``c_KV = X_kv·W_DKV`` (``[L_k, d_c]``), with each
head's ``K_h = c_KV·W_UK_h`` and ``V_h = c_KV·W_UV_h``; only ``c_KV`` is
cached.  In the file, ``mla: {d_c, w_dkv, heads: [{w_uk, w_uv}, ...]}``
stands in for the heads' ``w_k``, ``w_v``; the per-head form only.

:func:`prepare` runs before the v2 and v1 checks, on the same fields: it
reports every mistake of ``mla`` (and of what does not go with it) at its
line and column, each in one line naming the shapes, and hands the other
checks a view of the file in which each head holds the products
``W_DKV·W_UK_h`` and ``W_DKV·W_UV_h`` as its ``w_k``, ``w_v`` -- the same K
and V, exactly, since ``(X·W_DKV)·W_UK = X·(W_DKV·W_UK)`` -- so they check
the rest as before.  :func:`finish` adds the latent to the record.  Pure: no I/O.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from tutor.exercise.yamlread import Document, Path

from . import record
from .v2 import State, _Check, _cols, _copy, _d_model, _ragged, _vote

#: The fields an exercise with ``mla`` cannot have, and why (the message key's last part).
_NOT_WITH = (("num_kv_heads", "grouped"), ("kv_heads", "grouped"), ("cache", "cache"), ("past_x", "cache"),
             ("past_tokens", "cache"))
_MAX_D_C = 32  # LIMITS["d_k"] of .checks: d_c is a width like d_k


def _product(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    """``a·b``: ``[n, m]·[m, p] -> [n, p]``, exactly."""
    return [[sum((a[i][k] * b[k][j] for k in range(len(b))), Fraction(0)) for j in range(len(b[0]))]
            for i in range(len(a))]


def prepare(f: Any, doc: Document, bad: set[Path]) -> tuple[Any, record.Latent | None, list]:
    """Check ``mla`` of ``f``; return ``(the view the other checks see, the latent or None, the problems)``.

    ``f`` is an :class:`.schema.ExerciseFile` or the valid part of an
    invalid file; ``bad`` holds the paths already reported invalid and gets
    the heads' ``w_k``, ``w_v`` while the latent is not valid (so nothing
    else reports them missing, and the exercise is not built).  A file
    without ``mla`` is returned as it is.  Shapes: ``w_dkv [d_kv, d_c]``,
    ``w_uk [d_c, d_k]``, ``w_uv [d_c, d_v]`` per head.
    """
    if getattr(f, "mla", None) is None and ("mla",) not in bad:
        return f, None, []
    st = State()
    c = _Check(doc, bad, st)
    per_head = isinstance(f.heads, list)
    if per_head:  # until the latent is known good, no one else judges the heads' K/V weights
        for i in range(len(f.heads)):
            bad.update({("heads", i, "w_k"), ("heads", i, "w_v")})
    if ("mla",) in bad:
        return f, None, st.problems
    m = f.mla
    g = _copy(f)
    for name, why in _NOT_WITH:
        if getattr(f, name, None) is not None:
            c.add((name,), f"mla.not_with.{why}", field=name)
            setattr(g, name, None)  # reported here: the v2 checks see the file without it
    if not per_head:
        bad.update({("w_k",), ("w_v",)})  # mla stands for them: not reported missing
        if f.heads is None and ("heads",) not in bad:
            c.add(("mla",), "mla.per_head")
        return g, None, st.problems
    H = len(f.heads)
    if len(m.heads) != H:
        c.add(("mla", "heads"), "mla.heads.count", found=len(m.heads), H=H)
    for i, h in enumerate(f.heads):
        if h is None:
            continue
        for name in ("w_k", "w_v", "b_k", "b_v"):
            if getattr(h, name, None) is not None:
                c.add(("heads", i, name), "mla.in_head", field=name, head=i + 1)
    ok = not st.problems
    w_dkv = m.w_dkv if c.matrix(("mla", "w_dkv"), m.w_dkv) else None
    d_c = None
    if w_dkv is not None:
        d_c = _cols(w_dkv)
        if m.d_c is not None and m.d_c != d_c:
            c.add(("mla", "d_c"), "mla.d_c", found=m.d_c, cols=d_c)
        if d_c > _MAX_D_C:
            c.add(("mla", "w_dkv"), "limit", what="d_c", found=d_c, limit=_MAX_D_C)
        kv_name = "x_kv" if f.x_kv is not None else "x"
        kv = getattr(f, kv_name)
        width = len(kv[0]) if kv is not None and (kv_name,) not in bad and _ragged(kv) is None else None
        if kv_name == "x":  # d_model as most fields say it (x, the heads' w_q): a wrong x is the other checks' to report
            width = _d_model(f, bad, width)
        if width is not None and len(w_dkv) != width:
            c.add(("mla", "w_dkv"), "mla.w_dkv.rows", rows=len(w_dkv), cols=d_c, field=kv_name, width=width)
    ups: list[tuple[list[list[Fraction]], list[list[Fraction]]] | None] = []
    q_cols = [_cols(h.w_q) for i, h in enumerate(f.heads) if h is not None and h.w_q is not None
              and ("heads", i, "w_q") not in bad and _ragged(h.w_q) is None]
    uk_cols = [_cols(lh.w_uk) for lh in m.heads if lh.w_uk is not None and _ragged(lh.w_uk) is None]
    d_k = _vote(q_cols + uk_cols)  # as most fields say it: a head's wrong w_q is the other checks' to report
    for i, lh in enumerate(m.heads):
        p: Path = ("mla", "heads", i)
        w_uk = lh.w_uk if c.matrix(p + ("w_uk",), lh.w_uk) else None
        w_uv = lh.w_uv if c.matrix(p + ("w_uv",), lh.w_uv) else None
        for name, w, what in (("w_uk", w_uk, "d_k"), ("w_uv", w_uv, "d_v")):
            if w is not None and d_c is not None and len(w) != d_c:
                c.add(p + (name,), "mla.up.rows", field=name, head=i + 1, rows=len(w), cols=_cols(w), d_c=d_c, what=what)
        if w_uk is not None and d_k is not None and _cols(w_uk) != d_k:
            c.add(p + ("w_uk",), "mla.w_uk.cols", head=i + 1, rows=len(w_uk), cols=_cols(w_uk), d_k=d_k)
        ups.append((w_uk, w_uv) if w_uk is not None and w_uv is not None else None)
    ok = ok and not st.problems and w_dkv is not None and all(u is not None for u in ups)
    if not ok or w_dkv is None:
        return g, None, st.problems
    for i, h in enumerate(g.heads):
        if h is None:
            continue
        w_uk, w_uv = ups[i]  # type: ignore[misc]
        h.w_k, h.w_v = _product(w_dkv, w_uk), _product(w_dkv, w_uv)  # [d_kv, d_c]·[d_c, d] -> [d_kv, d]
        bad.difference_update({("heads", i, "w_k"), ("heads", i, "w_v")})

    def matrix(a: list[list[Fraction]]) -> record.Matrix:
        return tuple(tuple(r) for r in a)

    latent = record.Latent(matrix(w_dkv), tuple(matrix(u[0]) for u in ups if u), tuple(matrix(u[1]) for u in ups if u))
    return g, latent, []


def finish(ex: record.Exercise, latent: record.Latent | None) -> record.Exercise:
    """The record the other checks built, with the latent of :func:`prepare`."""
    import dataclasses

    return ex if latent is None else dataclasses.replace(ex, mla=latent)

