"""The text of a new exercise file: a :class:`~tutor.authoring.draft.Draft` as commented YAML.

The opening comment says how the file was made and what its numbers turned
out to be (the ranges of Q, K, V and the scores, measured on the exercise
as written: the new tokens' Q against every key, the cache's included);
every field has a comment saying what it is.  Matrices are flow-style, one
row a line, aligned.  Pure: returns text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..base.cells import wrap
from ..base.messages import join_sentences, t
from ..exact.numbers import frac_text
from ..exercise.record import alibi_slope
from .draft import Draft, Weights
from .draw import Matrix, matmul, plus, transposed

_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def _row(values: Sequence[int], width: int) -> str:
    return "[" + ", ".join(f"{v:>{width}}" for v in values) + "]"


def _matrix(m: Matrix, indent: int) -> str:
    """Flow-style rows, one per line, aligned under the first: ``[[1, 0],\\n    [0, 1]]``."""
    width = max(len(str(v)) for row in m for v in row)
    pad = " " * (indent + 1)
    return "[" + f",\n{pad}".join(_row(r, width) for r in m) + "]"


def _vector(v: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, v)) + "]"


def _quote(text: str) -> str:
    """A YAML double-quoted scalar on one line (a newline becomes a space)."""
    one_line = " ".join(text.split())
    return '"' + one_line.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(text: str) -> str:
    """A token label in a YAML list: plain when YAML reads it back as that text, else double-quoted."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", text) and text.lower() not in _YAML_WORDS:
        return text
    return _quote(text)


def _labels(labels: Sequence[str]) -> str:
    return "[" + ", ".join(_label(s) for s in labels) + "]"


def _comment(text: str, indent: str = "") -> list[str]:
    """``text`` as YAML comment lines, each of its lines behind ``# ``."""
    return [f"{indent}# {line}" for line in text.split("\n")]


def _range(lo: int, hi: int) -> str:
    return t("new.file.range", lo=lo, hi=hi) if lo != hi else str(lo)


def _scale(d_k: int) -> str:
    """What dividing by ``sqrt(d_k)`` does to the numbers, for the file's opening comment."""
    if d_k in (1, 4):
        return t("new.file.scale.1") if d_k == 1 else t("new.file.scale.4")
    if d_k in (9, 16):
        return t("new.file.scale.square", d_k=d_k, root=math.isqrt(d_k))
    return t("new.file.scale.surd", root=f"sqrt({d_k})")


def _why(d: Draft) -> str:
    """The opening comment's account of the numbers: the values of x and the weights, the ranges of
    Q, K, V and the scores, what the scaling does, and that biases shift them."""
    kv = d.x_kv if d.x_kv is not None else d.x  # [L_k, d_kv] (the new tokens', with a cache)
    entries: list[int] = []
    scores: list[int] = []
    for n, w in enumerate(d.heads):
        past = d.cache[n // (len(d.heads) // len(d.cache))] if d.cache else ([], [])
        q = plus(matmul(d.x, w.w_q), w.b_q)  # [L, d_k]
        k = past[0] + plus(matmul(kv, w.w_k), w.b_k)  # [L_past + L_k, d_k]
        v = past[1] + plus(matmul(kv, w.w_v), w.b_v)  # [L_past + L_k, d_v]
        entries += [e for m in (q, k, v) for row in m for e in row]
        scores += [e for row in matmul(q, transposed(k)) for e in row]  # [L, L_past + L_k]
    x_values = sorted({v for row in d.x + (d.x_kv or []) for v in row})  # the x the file shows
    w_values = sorted({v for w in d.heads for m in (w.w_q, w.w_k, w.w_v) for row in m for v in row}
                      | {v for row in d.w_o or [] for v in row})
    d_ks = sorted({len(w.w_q[0]) for w in d.heads})
    if d.norm is not None and d.norm_placement != "post":  # after the norm Q, K, V are no integers: each row its root
        why = t("new.file.why.norm", x_values=", ".join(map(str, x_values)), w_values=", ".join(str(v) for v in w_values if v))
    else:
        why = t("new.file.why", x_values=", ".join(map(str, x_values)), w_values=", ".join(str(v) for v in w_values if v),
                qkv=_range(min(entries), max(entries)), scores=_range(min(scores), max(scores)),
                scale="; ".join(_scale(d_k) for d_k in d_ks))
    extra = [t("new.file.why.rope")] if d.rope is not None else []  # RoPE: the scores read Q_rot, K_rot (issue 23)
    extra += [t("new.file.why.postnorm")] if d.norm_placement == "post" else []  # issue 23: out_norm's roots, last
    extra += [t("new.file.why.mla")] if d.mla is not None else []  # issue 23: K, V from the latent
    if any(b is not None for w in d.heads for b in (w.b_q, w.b_k, w.b_v)) or d.b_o is not None:
        return join_sentences([why, t("new.file.why.bias"), *extra])
    return join_sentences([why, *extra]) if extra else why


def text(d: Draft) -> str:
    """The commented exercise file of draft ``d``."""
    L, dm = len(d.x), len(d.x[0])
    out = [
        *_comment(t("new.file.written_by", command=d.command)),
        "#",
        *wrap(_why(d), 78, initial="# ", subsequent="# "),  # in cells: a translation may be Chinese
        "#",
        *_comment(t("new.file.check")),
        "",
        *_comment(t("new.file.id")),
        f"id: {d.id}",
        *_comment(t("new.file.title")),
        f"title: {_quote(d.title)}",
        *_comment(t("new.file.description")),
        "description: |",
        *(f"  {line}" for line in d.description.split("\n")),
    ]
    for lang, title, description in d.translations:
        out += [*_comment(t("new.file.translations")), "translations:", f"  {lang}:", f"    title: {_quote(title)}",
                "    description: |", *(f"      {line}" for line in description.split("\n"))]
    if d.cache:
        out += [*_comment(t("new.file.past_tokens")), f"past_tokens: {_labels(d.past_tokens)}",
                *_comment(t("new.file.past_x", L_past=len(d.past_x), d_model=dm)), f"past_x: {_matrix(d.past_x, 8)}",
                *_comment(t("new.file.cache", L_past=len(d.past_tokens), d_k=len(d.heads[0].w_q[0]))), "cache:"]
        for k, v in d.cache:
            out += [f"  - k: {_matrix(k, 7)}", f"    v: {_matrix(v, 7)}"]
    out += [*_comment(t("new.file.tokens")), f"tokens: {_labels(d.tokens)}",
            *_comment(join_sentences([t("new.file.x", L=L, d_model=dm), *([t("new.file.x.new")] if d.cache else [])])),
            f"x: {_matrix(d.x, 3)}"]
    if d.x_kv is not None:
        out += [*_comment(t("new.file.kv_tokens")), f"kv_tokens: {_labels(d.kv_tokens or ())}",
                *_comment(t("new.file.x_kv", L_k=len(d.x_kv), d_model=len(d.x_kv[0]))), f"x_kv: {_matrix(d.x_kv, 6)}"]
    out += _weights(d)
    if d.w_o is not None:
        out += [*_comment(t("new.file.w_o", rows=len(d.w_o), d_out=len(d.w_o[0]))), f"w_o: {_matrix(d.w_o, 5)}"]
        if d.b_o is not None:
            out += [*_comment(t("new.file.b_o")), f"b_o: {_vector(d.b_o)}"]
    if d.window is not None:  # issue 23
        W, S = d.window
        form = "{sliding_window: W, sinks: S}" if S else "{sliding_window: W}"  # the YAML form: code, not words
        out += [*_comment(t("new.file.mask.window.sinks" if S else "new.file.mask.window", window=form)),
                f"mask: {{sliding_window: {W}" + (f", sinks: {S}" if S else "") + "}"]
    elif d.mask == "causal":
        out += [*_comment(t("new.file.mask")), "mask: causal"]
    elif d.mask == "causal_lower_right":
        out += [*_comment(t("new.file.mask.lower_right")), "mask: causal_lower_right"]
    elif d.mask != "none":
        rows = ["[" + ", ".join("true" if a else "false" for a in row) + "]" for row in d.mask]
        out += [*_comment(t("new.file.mask.matrix")), "mask: [" + ",\n       ".join(rows) + "]"]
    if d.key_padding_mask is not None:
        out += [*_comment(t("new.file.key_padding_mask")),
                f"key_padding_mask: [{', '.join('true' if pad else 'false' for pad in d.key_padding_mask)}]"]
    if d.alibi:
        slopes = ", ".join(frac_text(alibi_slope(h, len(d.heads))) for h in range(len(d.heads)))
        out += [*_comment(t("new.file.alibi", slopes=slopes)), "alibi: true"]
    if d.rope is not None:  # format v3 (issue 23)
        sinks = _comment(t("new.file.rope.sinks")) if d.window is not None and d.window[1] else []  # text positions
        out += [*_comment(t("new.file.rope")), *sinks, f"rope: {{base: {d.rope[0]}, pairing: {d.rope[1]}}}"]
    if d.norm is not None:  # the pre-norm block (issue 23)
        post = d.norm_placement == "post"
        out += [*_comment(t(f"new.file.post.{d.norm}" if post else f"new.file.{d.norm}")), f"norm: {d.norm}"]
        if d.norm_eps is not None:
            out += [*_comment(t("new.file.norm_eps")), f"norm_eps: {d.norm_eps}"]
        if post:
            out += [*_comment(t("new.file.norm_placement")), "norm_placement: post"]
    if d.residual:
        out += [*_comment(t("new.file.residual")), "residual: true"]
    out += [*_comment(t("new.file.tags")), f"tags: {_labels(d.tags)}",
            *_comment(t("new.file.difficulty")), f"difficulty: {d.difficulty}", ""]
    return "\n".join(out)


def _weights(d: Draft) -> list[str]:
    """The heads' weights: per head; in the fused form; or grouped (``num_kv_heads``, the query heads'
    w_q, then each K/V head's w_k, w_v)."""
    src, dm = "x_kv" if d.x_kv is not None else "x", len(d.x[0])
    d_kv = len(d.heads[0].w_k)
    d_k = len(d.heads[0].w_q[0])
    if d.fused:
        return _fused(d, src)
    if d.mla is not None:  # issue 23: each head's w_q, then the latent and its up-projections
        return _latent(d)
    if d.kv_heads is not None:
        H, G = len(d.heads), d.kv_heads
        out = [*_comment(t("new.file.num_kv_heads", G=G, H=H, per=H // G)), f"num_kv_heads: {G}",
               *_comment(t("new.file.heads_q", d_model=dm, d_k=d_k)), "heads:"]
        for w in d.heads:
            out += [f"  - w_q: {_matrix(w.w_q, 9)}", *_biases(w, ("b_q",))]
        out += [*_comment(t("new.file.kv_heads", src=src, d_model=dm, d_k=d_k)), "kv_heads:"]
        for w in d.heads[::H // G]:
            out += [f"  - w_k: {_matrix(w.w_k, 9)}", f"    w_v: {_matrix(w.w_v, 9)}", *_biases(w, ("b_k", "b_v"))]
        return out
    if all(len(w.w_q[0]) == d_k == len(w.w_v[0]) for w in d.heads) and d_kv == dm:
        out = [*_comment(t("new.file.heads", src=src, d_model=dm, d_k=d_k)), "heads:"]
    else:
        out = [*_comment(t("new.file.heads.sizes", src=src)), "heads:"]
    for h, w in enumerate(d.heads):
        wk, wv = len(w.w_q[0]), len(w.w_v[0])
        out += [*_comment(t("new.file.head", head=h + 1) if wk == wv == d_k else
                          t("new.file.head.sized", head=h + 1, d_k=wk, d_v=wv), indent="  "),
                f"  - w_q: {_matrix(w.w_q, 9)}",
                f"    w_k: {_matrix(w.w_k, 9)}",
                f"    w_v: {_matrix(w.w_v, 9)}",
                *_biases(w, ("b_q", "b_k", "b_v"))]
    return out


def _latent(d: Draft) -> list[str]:
    """Multi-head latent attention's weights (issue 23): each head's ``w_q`` (and ``b_q``), then ``mla:`` with
    ``d_c``, ``w_dkv`` and each head's ``w_uk``, ``w_uv``."""
    assert d.mla is not None
    d_c, w_dkv, ups = d.mla
    dm, d_k = len(d.x[0]), len(d.heads[0].w_q[0])
    out = [*_comment(t("new.file.heads_q", d_model=dm, d_k=d_k)), "heads:"]
    for w in d.heads:
        out += [f"  - w_q: {_matrix(w.w_q, 9)}", *_biases(w, ("b_q",))]
    out += [*_comment(t("new.file.mla", d_model=dm, d_c=d_c, d_k=d_k)), "mla:", f"  d_c: {d_c}",
            f"  w_dkv: {_matrix(w_dkv, 9)}", "  heads:"]
    for uk, uv in ups:
        out += [f"    - w_uk: {_matrix(uk, 12)}", f"      w_uv: {_matrix(uv, 12)}"]
    return out


def _biases(w: Weights, names: Sequence[str]) -> list[str]:
    """``    b_q: [...]`` for each of ``names`` that head ``w`` has."""
    return [f"    {name}: {_vector(b)}" for name in names if (b := getattr(w, name)) is not None]


def _fused(d: Draft, src: str) -> list[str]:
    """The weights in the fused form: ``num_heads`` and one ``w_q``, ``w_k``, ``w_v`` (and bias) whose
    columns are the heads' side by side (head h: columns h·d_k to (h+1)·d_k), as in the exercise it is like."""
    H, h0 = len(d.heads), d.heads[0]
    d_k, d_v = len(h0.w_q[0]), len(h0.w_v[0])
    out = [*_comment(t("new.file.fused", src=src, d_model=len(d.x[0]), d_kv=len(h0.w_k), heads=H, d_k=d_k, d_v=d_v,
                       wk=H * d_k, wv=H * d_v)),
           f"num_heads: {H}"]
    for name in ("w_q", "w_k", "w_v"):
        parts: list[Matrix] = [getattr(w, name) for w in d.heads]
        joined = [[e for m in parts for e in m[r]] for r in range(len(parts[0]))]  # [d, H·d_k]
        out.append(f"{name}: {_matrix(joined, len(name) + 2)}")
    biases = [(name, [getattr(w, name) for w in d.heads]) for name in ("b_q", "b_k", "b_v")]
    biases = [(name, bs) for name, bs in biases if all(b is not None for b in bs)]
    if biases:
        out += _comment(t("new.file.fused.bias"))
    out += [f"{name}: {_vector([e for b in bs for e in b or ()])}" for name, bs in biases]
    return out
