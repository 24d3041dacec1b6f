"""``attn-tutor new`` for format v2: grouped K/V heads (``--kv-heads``), a KV cache (``--cache``),
``--mask causal_lower_right`` and ALiBi (``--alibi``), with the same paper-sized integers as :mod:`.generate`.

How the numbers are drawn: as :func:`tutor.authoring.generate._pick` draws a v1
exercise, over the whole sequence (the cached tokens and the new ones); then
the K/V weights of each group are those of its first query head, the first
``--cache`` rows of x become the cache (their K = x·W_K and V = x·W_V, one
entry per K/V head, integers) and the rest the new tokens.  The ranges the
file's comment states are measured on the exercise as written (the new
tokens' Q against every key).  Pure: no printing, no files.
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import replace
from typing import Any

from ..base.messages import plural, t
from .generate import (
    LEVELS,
    Matrix,
    Spec,
    _comment,
    _matmul,
    _matrix,
    _pick,
    _quote,
    _range,
    _scale,
    _spec_shape,
    command_line,
)


def is_v2(spec: Spec) -> bool:
    """Whether ``spec`` asks for a v2 feature (then :func:`generate_v2` writes it)."""
    return spec.kv_heads is not None or spec.cache is not None or spec.alibi or spec.mask == "causal_lower_right"


class SpecError(ValueError):
    """A v2 spec that cannot be an exercise: the sentence, and the option it is about (``--kv-heads``)."""

    def __init__(self, message: str, option: str):
        super().__init__(message)
        self.option = option


def check_v2(spec: Spec) -> None:
    """Raise :class:`SpecError` (one sentence, from the catalogue) for a v2 spec that cannot be an exercise."""
    H = spec.heads
    if spec.kv_heads is not None and (spec.kv_heads > H or H % spec.kv_heads):
        raise SpecError(t("new.kv_heads.divide", G=spec.kv_heads, H=H), "--kv-heads")
    if spec.cache is not None and spec.cross is not None:
        raise SpecError(t("new.cache.cross"), "--cache")
    if spec.cache is not None and spec.cache + spec.tokens > 16:
        raise SpecError(t("new.cache.limit", total=spec.cache + spec.tokens), "--cache")
    if spec.mask == "causal_lower_right" and spec.cache is None and spec.cross is None:
        raise SpecError(t("new.lower_right.alone"), "--mask")
    if spec.alibi and (spec.cross is not None or H & (H - 1)):
        raise SpecError(t("new.alibi.heads", H=H) if spec.cross is None else t("new.alibi.cross"), "--alibi")


_GROUP_TRIES = 20


def _same_weights(c: Any, spec: Spec, per: int) -> bool:
    """Whether two query heads of one group would have the same weights: their scores differ by a
    constant along every row (over the keys each row may attend to), so the softmax, and, with their
    shared V, their outputs, are the same; such heads teach nothing the first one does not."""
    N = spec.cache or 0
    x_new = c.x[N:]
    kv = c.x_kv if c.x_kv is not None else c.x
    causal = spec.mask in ("causal", "causal_lower_right")
    for g in range(len(c.heads) // per):
        k = _matmul(kv, c.heads[g * per].w[1])  # the group's K, every key
        scores = [_matmul(_matmul(x_new, c.heads[h].w[0]), [list(col) for col in zip(*k)])
                  for h in range(g * per, (g + 1) * per)]
        for a in range(len(scores)):
            for b in range(a + 1, len(scores)):
                rows = [[s1 - s2 for j, (s1, s2) in enumerate(zip(r1, r2)) if not causal or j <= i + N]
                        for i, (r1, r2) in enumerate(zip(scores[a], scores[b]))]
                if all(len(set(r)) <= 1 for r in rows):
                    return True
    return False


def default_id_v2(spec: Spec, base: str) -> str:
    """The v1 id with ``-kv1``, ``-cache3``, ``-alibi`` inserted before the seed."""
    head, _, seed = base.rpartition("-")
    parts = [head]
    if spec.kv_heads is not None:
        parts.append(f"kv{spec.kv_heads}")
    if spec.cache is not None:
        parts.append(f"cache{spec.cache}")
    if spec.alibi:
        parts.append("alibi")
    return "-".join(parts + [seed])


def title_v2(spec: Spec) -> str:
    """What the v2 options add to the title."""
    out = ""
    if spec.kv_heads is not None:
        out += plural("new.title.kv_heads", spec.kv_heads)
    if spec.cache is not None:
        out += plural("new.title.cache", spec.cache)
    if spec.mask == "causal_lower_right":
        out += t("new.title.lower_right")
    if spec.alibi:
        out += t("new.title.alibi")
    return out


def command_line_v2(spec: Spec) -> str:
    """The ``attn-tutor new`` command that writes this exercise again."""
    line = command_line(spec)
    head, _, seed = line.rpartition(" --seed ")
    extra = ""
    if spec.kv_heads is not None:
        extra += f" --kv-heads {spec.kv_heads}"
    if spec.cache is not None:
        extra += f" --cache {spec.cache}"
    if spec.alibi:
        extra += " --alibi"
    return f"{head}{extra} --seed {seed}"


def generate_v2(spec: Spec, exercise_id: str, title: str) -> str:
    """The text of a new, commented v2 exercise for ``spec`` (deterministic for its seed)."""
    check_v2(spec)
    N = spec.cache or 0
    full = replace(spec, tokens=spec.tokens + N, kv_heads=None, cache=None, alibi=False,
                   mask="causal" if spec.mask == "causal_lower_right" else spec.mask)
    H = spec.heads
    G = spec.kv_heads or H
    per = H // G
    seed = full.seed
    for _ in range(_GROUP_TRIES):  # deterministic: the same seed draws the same retries
        c = _pick(_spec_shape(full), LEVELS[full.level], seed, full.allow_dull)
        if full.allow_dull or not _same_weights(c, spec, per):
            break
        seed = random.Random(seed).randrange(2**31)
    w_q = [h.w[0] for h in c.heads]
    w_kv = [(c.heads[g * per].w[1], c.heads[g * per].w[2]) for g in range(G)]  # each group's first head's K/V
    x_past, x_new = c.x[:N], c.x[N:]
    kv_src = c.x_kv if c.x_kv is not None else c.x  # every key: the cached tokens and the new ones
    # the ranges as the exercise has them: the new tokens' Q; K, V over every key; their scores
    qs = [_matmul(x_new, w) for w in w_q]
    ks = [_matmul(kv_src, w_kv[h // per][0]) for h in range(H)]
    vs = [_matmul(kv_src, w_kv[g][1]) for g in range(G)]
    scores = [e for q, k in zip(qs, ks) for row in _matmul(q, [list(col) for col in zip(*k)]) for e in row]
    entries = [e for m in qs + ks + vs for row in m for e in row]
    x_values = sorted({v for row in x_new + (c.x_kv or []) for v in row})  # the x the file shows (not the cached tokens')
    w_values = sorted({v for m in w_q + [w for pair in w_kv for w in pair] for row in m for v in row})
    why = t("new.file.why", x_values=", ".join(map(str, x_values)), w_values=", ".join(str(v) for v in w_values if v),
            qkv=_range(min(entries), max(entries)), scores=_range(min(scores), max(scores)), scale=_scale(spec.d_k))
    L, d, d_k = spec.tokens, spec.d_model, spec.d_k
    out = [
        *_comment(t("new.file.written_by", command=command_line_v2(spec))),
        "#",
        *textwrap.wrap(why, 78, initial_indent="# ", subsequent_indent="# "),
        "#",
        *_comment(t("new.file.check")),
        "",
        *_comment(t("new.file.id")),
        f"id: {exercise_id}",
        *_comment(t("new.file.title")),
        f"title: {_quote(title)}",
        *_comment(t("new.file.description")),
        "description: |",
        *(f"  {line}" for line in t("new.file.description.text", seed=spec.seed).split("\n")),
    ]
    if N:
        cache: list[tuple[Matrix, Matrix]] = [(_matmul(x_past, wk), _matmul(x_past, wv)) for wk, wv in w_kv]
        out += [*_comment(t("new.file.past_tokens")), f"past_tokens: [{', '.join(f'p{j + 1}' for j in range(N))}]",
                *_comment(t("new.file.cache", L_past=N, d_k=d_k)), "cache:"]
        for k, v in cache:
            out += [f"  - k: {_matrix(k, 7)}", f"    v: {_matrix(v, 7)}"]
    out += [*_comment(t("new.file.tokens")), f"tokens: [{', '.join(f't{i + 1}' for i in range(L))}]",
            *_comment(t("new.file.x", L=L, d_model=d) + (" " + t("new.file.x.new") if N else "")),
            f"x: {_matrix(x_new, 3)}"]
    if c.x_kv is not None:
        out += [*_comment(t("new.file.kv_tokens")), f"kv_tokens: [{', '.join(f's{j + 1}' for j in range(len(c.x_kv)))}]",
                *_comment(t("new.file.x_kv", L_k=len(c.x_kv), d_model=d)), f"x_kv: {_matrix(c.x_kv, 6)}"]
    src = "x_kv" if c.x_kv is not None else "x"
    if G < H:
        out += [*_comment(t("new.file.num_kv_heads", G=G, H=H, per=per)), f"num_kv_heads: {G}",
                *_comment(t("new.file.heads_q", d_model=d, d_k=d_k)), "heads:"]
        out += [f"  - w_q: {_matrix(w, 9)}" for w in w_q]
        out += [*_comment(t("new.file.kv_heads", src=src, d_model=d, d_k=d_k)), "kv_heads:"]
        out += [line for wk, wv in w_kv for line in (f"  - w_k: {_matrix(wk, 9)}", f"    w_v: {_matrix(wv, 9)}")]
    else:
        out += [*_comment(t("new.file.heads", src=src, d_model=d, d_k=d_k)), "heads:"]
        for h in range(H):
            out += [*_comment(t("new.file.head", head=h + 1), indent="  "), f"  - w_q: {_matrix(w_q[h], 9)}",
                    f"    w_k: {_matrix(w_kv[h][0], 9)}", f"    w_v: {_matrix(w_kv[h][1], 9)}"]
    if spec.mask == "causal":
        out += [*_comment(t("new.file.mask")), "mask: causal"]
    elif spec.mask == "causal_lower_right":
        out += [*_comment(t("new.file.mask.lower_right")), "mask: causal_lower_right"]
    elif spec.mask == "padding":
        keys = N + L if c.x_kv is None else len(c.x_kv)
        pads = [True] + [False] * (keys - 1) if N else [False] * (keys - 1) + [True]  # with a cache: left padding
        out += [*_comment(t("new.file.key_padding_mask")),
                "key_padding_mask: [" + ", ".join("true" if p else "false" for p in pads) + "]"]
    if spec.alibi:
        out += [*_comment(t("new.file.alibi")), "alibi: true"]
    tags = ["generated", "single-head" if H == 1 else "multi-head"]
    tags += {"causal": ["mask", "causal"], "padding": ["mask", "padding"],
             "causal_lower_right": ["mask", "causal", "causal-alignment"]}.get(spec.mask, [])
    tags += ["cross-attention"] if c.x_kv is not None else []
    tags += (["grouped-kv"] if G < H else []) + (["kv-cache"] if N else []) + (["position-bias"] if spec.alibi else [])
    out += [*_comment(t("new.file.tags")), f"tags: [{', '.join(tags)}]",
            *_comment(t("new.file.difficulty")), f"difficulty: {spec.level}", ""]
    return "\n".join(out)
