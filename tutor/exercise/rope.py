"""Format v3's RoPE field checked and put in the record (issue 23).

``rope: {base: 10000, pairing: interleaved | half}`` turns each head's Q and
K by position before the scores (Su et al. 2021, "RoFormer", §3.4.2).  The
schema (:class:`.schema.RopeBlock`) reads the two fields; :func:`finish`
checks what needs the rest of the exercise -- every head's ``d_k`` even, and
every angle ``θ_i = base^(−2i/d_k)`` rational, so that the exact engine can
keep ``cos(m·θ_i)`` and ``sin(m·θ_i)`` exact -- and refuses, at the field,
the combinations the engines do not compute with RoPE yet.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tutor.base.errors import Problem
from tutor.base.messages import t
from tutor.exercise.yamlread import Document

from . import record


def finish(ex: record.Exercise, f: Any, doc: Document) -> tuple[list[Problem], record.Exercise | None]:
    """``(problems, the exercise with its rope)`` for a file whose ``rope`` field the schema accepted.

    Refused, each at its field: an odd ``d_k`` (a pair per two dimensions), an irrational angle (``base^(2/d_k)``
    not a whole number), RoPE with cross-attention (the keys of another sequence have no positions in
    this one), with ``past_x`` (a RoPE cache holds keys already rotated, by cosines and sines: no exact
    projection of ``past_x`` gives them), with an additive bias (ALiBi or ``attn_bias``), with ``mla``
    (DeepSeek-V2's decoupled RoPE key is not built) and with the pre-norm block's ``norm`` or ``residual`` (after a
    norm each row of Q and K carries its own square root, and the rotation's exact engine takes rational Q and K;
    the block's run has no rotation): not built yet.
    A KV cache is taken as RoPE's: its keys already rotated, each at its own position ``0 … L_past − 1``.
    With attention sinks, a warning: positions are the text's, not StreamingLLM's places in the cache; without a
    ``pairing``, a warning naming the one taken (interleaved), since the LLaMA family pairs half.
    """
    block = f.rope
    rope = record.Rope(base=block.base, pairing=block.pairing)
    problems: list[Problem] = []

    def add(path: tuple[str, ...], key: str, **fields: Any) -> None:
        problems.append(doc.problem(path, t(key, **fields), t(f"{key}.hint", **fields)))

    where = ("rope", "base") if "base" in block.model_fields_set else ("rope",)
    d_ks = sorted({h.d_k for h in ex.heads})
    odd = [d for d in d_ks if d % 2]
    if odd:
        add(("rope",), "rope.odd", d_k=odd[0])
    else:
        for d_k in d_ks:
            if rope.thetas(d_k) is None:
                add(where, "rope.irrational", base=rope.base, d_k=d_k, half=d_k // 2)
                break
    if ex.is_cross:
        add(("rope",), "rope.cross")
    if ex.past_x is not None:  # a RoPE cache holds rotated keys: cos and sin, which past_x's projections are not
        add(("past_x",), "rope.past_x")
    if ex.has_bias:
        add(("rope",), "rope.bias")
    if ex.mla is not None:  # DeepSeek-V2's decoupled RoPE key is not built (merge of i23-mla)
        add(("rope",), "rope.mla")
    if ex.has_norm:  # after the norm Q and K carry a square root per row: the rotation takes rationals
        add(("rope",), "rope.norm")
    elif ex.residual:  # the pre-norm block's run has no rotation
        add(("rope",), "rope.residual")
    if problems:
        return problems, None
    if "pairing" not in block.model_fields_set:  # the default is the bug the issue is about: say which one was taken
        doc.warnings.append(doc.problem(("rope",), t("v3.rope.pairing_default"), t("v3.rope.pairing_default.hint")))
    if ex.window is not None and ex.sinks:  # a warning: text positions, not StreamingLLM's places in the cache
        doc.warnings.append(doc.problem(("rope",), t("v3.rope.sinks"), t("v3.rope.sinks.hint")))
    return [], dataclasses.replace(ex, rope=rope)
