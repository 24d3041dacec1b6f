"""The worked solution as JSON (the contract's ``--format json``).

``{"exercise": {...}, "steps": [{"id", "head", "title", "formula", "shape",
"exact", "value", "why", "indistinguishable"}], "production": [...], "notes": [...],
"production_masks": [...]}``: exact entries are answer-grammar strings (Euler's number
written ``exp(1)``, never ``e``), values are floats, and a masked score is ``"-inf"`` exactly with value ``null``;
``why`` the sentences a reader gets beside the step; ``indistinguishable``
lists the keys of the misconceptions (:data:`tutor.mistakes.diagnose.MISCONCEPTIONS`)
that give exactly the step's right value on this exercise, so that no answer
can reveal them there.  ``production`` is the batched layer's shape trace,
``notes`` the sentences on its configuration, ``production_masks`` the
exercise's masks as PyTorch takes them (:func:`mask_dict`).  The steps are the
flat list of :func:`tutor.render.outline.outline`.
"""

from __future__ import annotations

import math
from typing import Any

from ..base.jsontext import compact
from ..base.messages import plural_category
from ..exact.numbers import frac_text
from ..exercise.record import Exercise, Matrix, Vector, alibi_slope
from ..steps import Solution
from .outline import MaskItem, StepItem, outline


def _m(m: Matrix | None) -> list[list[str]] | None:
    return None if m is None else [[frac_text(v) for v in row] for row in m]


def _v(v: Vector | None) -> list[str] | None:
    return None if v is None else [frac_text(x) for x in v]


def exercise_dict(ex: Exercise) -> dict[str, Any]:
    """The exercise's sizes, labels, masks and inputs (entries as exact strings)."""
    return {
        "id": ex.id,
        "title": ex.local_title,
        "description": ex.local_description,
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
        "key_padding_mask": None if ex.key_padding_mask is None else list(ex.key_padding_mask),
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
        **_v2_dict(ex),
        **_latent_dict(ex),
        **_block_dict(ex),
    }


def _block_dict(ex: Exercise) -> dict[str, Any]:
    """Format v3's block (issue 23; present only with a norm or a residual): ``norm``, ``norm_eps``,
    ``norm_placement`` (``pre``: X normalized before the projections; ``post``: X + output normalized, the
    ``out_norm`` step) and ``residual``."""
    if ex.norm is None and not ex.residual:
        return {}
    return {"norm": ex.norm, "norm_eps": frac_text(ex.norm_eps) if ex.norm is not None else None,
            "norm_placement": ex.norm_placement if ex.norm is not None else None, "residual": ex.residual}


def _latent_dict(ex: Exercise) -> dict[str, Any]:
    """Format v3's multi-head latent attention (present only with it): ``d_c``, ``w_dkv`` and each head's ``w_uk``,
    ``w_uv``; the heads' ``w_k``, ``w_v`` above are then the products ``W_DKV·W_UK``, ``W_DKV·W_UV``."""
    if ex.mla is None:
        return {}
    return {"mla": {"d_c": ex.mla.d_c, "w_dkv": _m(ex.mla.w_dkv),
                    "heads": [{"w_uk": _m(uk), "w_uv": _m(uv)} for uk, uv in zip(ex.mla.w_uk, ex.mla.w_uv, strict=True)]}}


def _v2_dict(ex: Exercise) -> dict[str, Any]:
    """Format v2's parts of the exercise (present only when it uses them): grouped K/V heads, the cache, the bias."""
    out: dict[str, Any] = {}
    if ex.kv_heads is not None:
        out["num_kv_heads"] = ex.num_kv_heads
        out["kv_heads"] = [{"w_k": _m(h.w_k), "w_v": _m(h.w_v), "b_k": _v(h.b_k), "b_v": _v(h.b_v)} for h in ex.kv_heads]
    if ex.cache is not None:
        out["L_past"] = ex.L_past
        out["past_tokens"] = list(ex.past_labels)
        out["cache"] = [{"k": _m(c.k), "v": _m(c.v)} for c in ex.cache]
        if ex.past_x is not None:
            out["past_x"] = _m(ex.past_x)
    if ex.bias is not None:
        out["alibi"] = ex.alibi
        out["attn_bias"] = [_m(b) for b in ex.bias]
    if ex.window is not None:  # issue 23: mask "sliding_window"
        out["sliding_window"] = ex.window
        out["sinks"] = ex.sinks
    if ex.alibi:
        out["alibi_slopes"] = [frac_text(alibi_slope(h, ex.num_heads)) for h in range(ex.num_heads)]
    if ex.rope is not None:  # format v3 (issue 23): RoPE's base and pairing
        out["rope"] = {"base": ex.rope.base, "pairing": ex.rope.pairing}
    return out


def step_dict(item: StepItem) -> dict[str, Any]:
    """One step as JSON, with ``why`` (the sentences a reader gets beside it: its kind's ``why``) and
    ``indistinguishable`` (the misconception keys that give exactly its right value:
    :func:`tutor.mistakes.invisible.by_step`).  A K or V step shared by grouped query heads (format v2) has
    ``head`` null and gives ``kv_head`` and ``shared_by``."""
    step = item.step
    kv = {} if step.kv_head is None else {"kv_head": step.kv_head, "shared_by": list(step.shared)}
    return {
        "id": step.id,
        "head": None if step.kv_head is not None else step.head,  # a shared K/V step belongs to its K/V head
        **kv,
        "title": item.title,
        "formula": step.formula,
        "shape": list(step.shape),
        "annotation": step.annotation(),
        "exact": [[str(e) for e in row] for row in step.exact],
        "value": [[None if math.isinf(v) else v for v in row] for row in step.value],
        "why": list(item.why),
        "indistinguishable": list(item.keys),
    }


def mask_dict(item: MaskItem) -> dict[str, Any]:
    """One mask as PyTorch takes it: ``api``, ``argument``, ``value``, ``code``, ``meaning``."""
    m = item.mask
    return {"api": m.api_name, "argument": m.argument, "value": _nested(m.value), "code": m.code(),
            "meaning": item.meaning}


def _nested(value: bool | str | tuple) -> bool | str | list:
    return value if isinstance(value, (bool, str)) else [_nested(v) for v in value]


def solution_dict(sol: Solution, head: int | None = None) -> dict[str, Any]:
    """The document: ``exercise``, ``steps`` (the outline's flat list, :attr:`tutor.render.outline.Outline.steps`:
    each step with its ``why`` sentences and the mistakes that cannot show there), ``production`` (the
    batched forward pass, each step with its ``note`` and the note's catalogue ``key``), ``notes`` (on the
    configuration: causal alignment) and ``production_masks`` (the masks as PyTorch takes them)."""
    o = outline(sol, head=head, brief=True, keys=True)  # no arithmetic; the mistakes as keys
    production = [{"name": p.name, "dims": list(p.dims), "shape": list(p.shape), "note": p.note,
                   "key": p.key if p.count is None else f"{p.key}.{plural_category(p.count)}"}
                  for p in o.production]
    return {"exercise": exercise_dict(o.exercise), "steps": [step_dict(item) for item in o.steps],
            "production": production, "notes": list(o.production_notes), "production_masks": [mask_dict(m) for m in o.masks]}


def dumps(sol: Solution, head: int | None = None) -> str:
    """JSON text (ASCII-safe: non-ASCII notation is escaped)."""
    return compact(solution_dict(sol, head))
