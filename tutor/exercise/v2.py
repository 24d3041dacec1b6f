"""Format v2: grouped K/V heads, a KV cache, causal alignment and an additive bias, checked and put in the record.

The v1 checks (:mod:`.checks`) know nothing of these fields.  :func:`prepare`
runs first, on the same fields: it reports every mistake in a v2 field at
its line and column, and hands the v1 checks a view of the file they can
check as before --

* grouped K/V heads expanded to one K/V projection per query head (query
  head ``h`` reads K/V head ``h // (num_heads / num_kv_heads)``, the
  ``repeat_interleave`` order of PyTorch's ``enable_gqa=True``);
* with a cache, the mask and the key padding taken out (they have
  ``L_past + L`` columns, which only this module knows), and checked here;
* a causal mask with an alignment (``causal_upper_left`` is ``causal``;
  ``causal_lower_right``) built here.

:func:`finish` adds the v2 parts to the :class:`.record.Exercise` the v1
checks built.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

from tutor.base.errors import Problem
from tutor.base.messages import t
from tutor.exercise.yamlread import Document, Path

from . import record
from .schema import MAX_DENOMINATOR, MAX_DENOMINATOR_DIGITS, ExerciseFile, HeadBlock, WindowMask

_V2_FIELDS = ("num_kv_heads", "kv_heads", "cache", "past_tokens", "past_x", "attn_bias", "alibi")
_MAX_KEYS = 16  # LIMITS["L_k"] of .checks: the cached keys and the new ones together


@dataclass
class State:
    """What :func:`finish` adds to the record (built by :func:`prepare`)."""

    kv_heads: tuple[record.KVHead, ...] | None = None
    cache: tuple[record.CacheEntry, ...] | None = None
    past_tokens: tuple[str, ...] | None = None
    past_x: record.Matrix | None = None  # the cached tokens' inputs (checked against the cache by :func:`derived`)
    mask_name: str | None = None  # a causal mask built here: "causal" (top-left) or "causal_lower_right"
    mask_matrix: tuple[tuple[bool, ...], ...] | None = None  # a mask matrix checked here (with a cache)
    padding: tuple[bool, ...] | None = None  # key padding checked here (with a cache), True = a real key
    bias: list[list[list[Fraction]]] | None = None  # per head, or one for every head
    alibi: bool = False
    window: tuple[int, int] | None = None  # issue 23: mask {sliding_window: W, sinks: S} as (W, S)
    problems: list[Problem] = field(default_factory=list)


def _copy(f: Any) -> SimpleNamespace:
    out = SimpleNamespace(**{name: getattr(f, name) for name in ExerciseFile.model_fields})
    if isinstance(out.heads, list):
        out.heads = [None if h is None else SimpleNamespace(**{n: getattr(h, n) for n in HeadBlock.model_fields})
                     for h in out.heads]
    return out


def _cols(m: list[list[Any]]) -> int:
    return len(m[0])


def _ragged(m: list[list[Any]]) -> int | None:
    """The first row (0-based) whose length differs from row 0's, or ``None``."""
    return next((r for r, row in enumerate(m) if len(row) != len(m[0])), None)


class _Check:
    def __init__(self, doc: Document, bad: set[Path], st: State):
        self.doc, self.bad, self.st = doc, bad, st

    def add(self, path: Path, key: str, **fields: Any) -> None:
        try:
            hint = t(key + ".hint", **fields)
        except KeyError:
            hint = ""
        self.st.problems.append(self.doc.problem(path, t(key, **fields), hint))

    def ok(self, path: Path, value: Any) -> bool:
        return value is not None and path not in self.bad

    def matrix(self, path: Path, m: list[list[Fraction]] | None) -> bool:
        """A matrix that is valid, rectangular and within the denominator limit (else reported, and ``False``)."""
        if not self.ok(path, m):
            return False
        assert m is not None
        r = _ragged(m)
        if r is not None:
            self.add(path + (r,), "shape.ragged", row=r + 1, found=len(m[r]), expected=len(m[0]))
            self.bad.add(path)
            return False
        common = 1
        for i, row in enumerate(m):
            for j, q in enumerate(row):
                common = math.lcm(common, q.denominator)
                if common > MAX_DENOMINATOR:
                    self.add(path + (i, j), "limit.denominator", field=path[-1], digits=len(str(common)),
                             limit=MAX_DENOMINATOR_DIGITS)
                    self.bad.add(path)
                    return False
        return True


def prepare(f: Any, doc: Document, bad: set[Path]) -> tuple[Any, State]:
    """Check the v2 fields of ``f`` and return ``(the view the v1 checks see, the state for finish)``.

    ``f`` is an :class:`.schema.ExerciseFile` or the valid part of an invalid
    file (:func:`.load.partial`); ``bad`` holds the paths already reported
    invalid, and gets the v2 fields found invalid here (so the exercise is
    not built).  A v1 file is returned as it is.
    """
    st = State()
    uses = [n for n in _V2_FIELDS if getattr(f, n, None) is not None or (n,) in bad]
    names = {f.mask} if isinstance(f.mask, str) else set()
    heads_without_kv = isinstance(f.heads, list) and any(
        h is not None and any(getattr(h, n) is None and ("heads", i, n) not in bad for n in ("w_k", "w_v"))
        for i, h in enumerate(f.heads))
    if not uses and not names & {"causal_upper_left", "causal_lower_right"} and not heads_without_kv \
            and not isinstance(f.mask, WindowMask):
        return f, st
    c = _Check(doc, bad, st)
    g = _copy(f)
    x = f.x if c.ok(("x",), f.x) and _ragged(f.x) is None else None
    L = len(x) if x is not None else None
    d_model = _cols(x) if x is not None else None
    cross = f.x_kv is not None or ("x_kv",) in bad
    per_head = isinstance(f.heads, list)
    H = len(f.heads) if per_head else f.num_heads if isinstance(f.num_heads, int) else None

    d_model = _d_model(f, bad, d_model) if not cross else d_model
    G = _groups(c, f, g, H, per_head, d_model)
    L_past = _cache(c, f, G if G is not None else H, cross)
    L_k = None
    if L is not None and not cross:
        L_k = L + (L_past or 0)
    elif cross and c.ok(("x_kv",), f.x_kv) and _ragged(f.x_kv) is None:
        L_k = len(f.x_kv)
    if L_past is not None and L is not None and L_k is not None and L_k > _MAX_KEYS:
        c.add(("cache",), "limit", what="L_past + L", found=L_k, limit=_MAX_KEYS)
        bad.add(("cache",))
    _masks(c, f, g, L, L_k, L_past is not None or ("cache",) in bad)
    _bias(c, f, H, L, L_k, cross)
    return g, st


def _d_model(f: Any, bad: set[Path], x_cols: int | None) -> int | None:
    """d_model as most fields say it: the columns of x and the rows of the query weights (ties go to x)."""
    from collections import Counter

    votes = [x_cols] if x_cols is not None else []
    if isinstance(f.heads, list):
        votes += [len(h.w_q) for i, h in enumerate(f.heads) if h is not None and h.w_q is not None
                  and ("heads", i, "w_q") not in bad]
    elif f.w_q is not None and ("w_q",) not in bad:
        votes.append(len(f.w_q))
    if not votes:
        return None
    count = Counter(votes)
    best = max(count.values())
    return x_cols if x_cols is not None and count[x_cols] == best else max(count, key=lambda v: count[v])


def _groups(c: _Check, f: Any, g: SimpleNamespace, H: int | None, per_head: bool, d_model: int | None) -> int | None:
    """num_kv_heads and kv_heads: report their mistakes, expand K/V to one per query head in ``g``; G or ``None``."""
    G: int | None = None
    bad = c.bad
    if ("num_kv_heads",) in bad and not per_head:  # reported already (num_kv_heads: 0): the widths hang on it
        bad.update({("w_k",), ("w_v",), ("b_k",), ("b_v",)})
        return None
    if f.num_kv_heads is not None:
        G = f.num_kv_heads
        if H is not None and (G > H or H % G):
            c.add(("num_kv_heads",), "v2.kv.divide", G=G, H=H)
            bad.add(("num_kv_heads",))
            if not per_head:  # the widths of w_k, w_v cannot be judged without G: not blamed
                bad.update({("w_k",), ("w_v",), ("b_k",), ("b_v",)})
            return None
    if f.kv_heads is not None and not per_head:
        c.add(("kv_heads",), "v2.kv_heads.fused")
        bad.add(("kv_heads",))
        return None
    if per_head:
        return _groups_per_head(c, f, g, H, G, d_model)
    if G is None or H is None or G == H:
        return G
    # the fused form: w_k [d_kv, G·d_k], w_v [d_kv, G·d_v], expanded to H K/V heads in repeat_interleave order
    d_k = _cols(f.w_q) // H if c.ok(("w_q",), f.w_q) and _ragged(f.w_q) is None and _cols(f.w_q) % H == 0 else None
    kv = []
    widths: dict[str, int] = {}
    for name, bname in (("w_k", "b_k"), ("w_v", "b_v")):
        w = getattr(f, name)
        if not c.matrix((name,), w):
            continue
        width = _cols(w)
        if (d_model is not None and not f.x_kv and len(w) != d_model and width == d_model and len(w) % G == 0
                and (name != "w_k" or d_k is None or len(w) == G * d_k)):  # nn.Linear's [out, in] layout
            c.add((name,), "shape.transposed", field=name, rows=len(w), cols=width, row_size="d_kv",
                  col_size="num_kv_heads·d_k" if name == "w_k" else "num_kv_heads·d_v")
            bad.add((name,))
            continue
        if width % G or (name == "w_k" and d_k is not None and width != G * d_k):
            c.add((name,), "v2.kv.fused_width", field=name, found=width, G=G,
                  what="d_k" if name == "w_k" else "d_v",
                  expected=f"{G}·{d_k} = {G * d_k}" if name == "w_k" and d_k is not None else f"a multiple of {G}")
            bad.add((name,))
            continue
        n = width // G
        widths[name] = n
        setattr(g, name, [[row[(h // (H // G)) * n + j] for h in range(H) for j in range(n)] for row in w])
        b = getattr(f, bname)
        if b is not None and (bname,) not in bad:
            if len(b) != width:
                c.add((bname,), "v2.kv.bias", field=bname, found=len(b), expected=width, weight=name)
                bad.add((bname,))
            else:
                setattr(g, bname, [b[(h // (H // G)) * n + j] for h in range(H) for j in range(n)])
        kv.append((name, w, n))
    if len(widths) == 2 and not bad & {("w_k",), ("w_v",), ("b_k",), ("b_v",)}:
        dk, dv = widths["w_k"], widths["w_v"]

        def cols(m: list[list[Fraction]], k: int, n: int) -> record.Matrix:
            return tuple(tuple(row[k * n:(k + 1) * n]) for row in m)

        def part(b: list[Fraction] | None, k: int, n: int) -> record.Vector | None:
            return None if b is None else tuple(b[k * n:(k + 1) * n])
        c.st.kv_heads = tuple(record.KVHead(cols(f.w_k, k, dk), cols(f.w_v, k, dv), part(f.b_k, k, dk), part(f.b_v, k, dv))
                              for k in range(G))
    return G


def _groups_per_head(c: _Check, f: Any, g: SimpleNamespace, H: int | None, G: int | None,
                     d_model: int | None) -> int | None:
    bad = c.bad
    heads = f.heads
    if f.kv_heads is None:
        if ("kv_heads",) in bad:
            return None
        for i, h in enumerate(heads):
            for name in ("w_k", "w_v"):
                if h is not None and getattr(h, name) is None and ("heads", i, name) not in bad:
                    if ("heads", i) not in c.doc.merged:  # else probably meant to come from the (reported) merge key
                        c.st.problems.append(c.doc.problem(("heads", i, name), t("schema.required"), t("v2.kv.missing.hint")))
                    bad.add(("heads", i))
        if G is not None and H is not None and G != H:
            c.add(("num_kv_heads",), "v2.kv_heads.needed", G=G, H=H)
            bad.add(("num_kv_heads",))
        return G
    kvs = f.kv_heads
    if G is None:
        G = len(kvs)
    if len(kvs) != G:
        c.add(("kv_heads",), "v2.kv_heads.count", found=len(kvs), G=G)
        bad.add(("kv_heads",))
        return None
    if H is not None and (G > H or H % G):
        c.add(("kv_heads",), "v2.kv.divide", G=G, H=H)
        bad.add(("kv_heads",))
        return None
    for i, h in enumerate(heads):
        for name in ("w_k", "w_v", "b_k", "b_v"):
            if h is not None and getattr(h, name) is not None:
                c.add(("heads", i, name), "v2.kv_heads.in_head", field=name, kv=(i // (H // G) if H else 0) + 1)
                bad.add(("heads", i))
    d_k = None
    q_widths = {_cols(h.w_q) for i, h in enumerate(heads) if h is not None and c.ok(("heads", i, "w_q"), h.w_q)
                and _ragged(h.w_q) is None}
    if len(q_widths) == 1:
        d_k = q_widths.pop()
    d_v = None
    ok = True
    for k, kv in enumerate(kvs):
        p: Path = ("kv_heads", k)
        for name in ("w_k", "w_v"):
            w = getattr(kv, name)
            if not c.matrix(p + (name,), w):
                ok = False
                continue
            if d_model is not None and not f.x_kv and len(w) != d_model:
                c.add(p + (name,), "shape.rows", field=name, found=len(w), other="x", expected=d_model, name="d_model")
                ok = False
            elif name == "w_k" and d_k is not None and _cols(w) != d_k:
                c.add(p + (name,), "v2.kv_heads.d_k", found=_cols(w), d_k=d_k)
                ok = False
            elif name == "w_v":
                if d_v is None:
                    d_v = _cols(w)
                elif _cols(w) != d_v:
                    c.add(p + (name,), "v2.kv_heads.d_v", found=_cols(w), d_v=d_v)
                    ok = False
        for bname, wname in (("b_k", "w_k"), ("b_v", "w_v")):
            b, w = getattr(kv, bname), getattr(kv, wname)
            if b is not None and w is not None and _ragged(w) is None and len(b) != _cols(w):
                c.add(p + (bname,), "v2.kv.bias", field=bname, found=len(b), expected=_cols(w), weight=wname)
                ok = False
    if not ok:
        bad.add(("kv_heads",))
        return G
    if H is not None:
        for i, h in enumerate(g.heads):
            if h is not None:
                kv = kvs[i // (H // G)]
                h.w_k, h.w_v, h.b_k, h.b_v = kv.w_k, kv.w_v, kv.b_k, kv.b_v

    def m(a: list[list[Fraction]]) -> record.Matrix:
        return tuple(tuple(r) for r in a)
    c.st.kv_heads = tuple(record.KVHead(m(kv.w_k), m(kv.w_v), None if kv.b_k is None else tuple(kv.b_k),
                                        None if kv.b_v is None else tuple(kv.b_v)) for kv in kvs)
    return G


def _cache(c: _Check, f: Any, G: int | None, cross: bool) -> int | None:
    """cache, past_tokens and past_x: their mistakes; ``L_past``, or ``None`` without a (valid) cache."""
    if f.cache is None:
        for name in ("past_tokens", "past_x"):
            if getattr(f, name) is not None:
                c.add((name,), f"v2.{name}.alone")
                c.bad.add((name,))
        return None
    if cross:
        c.add(("cache",), "v2.cache.cross")
        c.bad.add(("cache",))
        return None
    entries = f.cache
    ok = True
    if G is not None and len(entries) != G:  # reported, and the entries still checked: every problem at once
        c.add(("cache",), "v2.cache.count", found=len(entries), G=G)
        ok = False
    says_k, says_v = _head_sizes(c, f, G)
    widths_k = [_cols(e.k) for e in entries if e.k is not None and _ragged(e.k) is None]
    widths_v = [_cols(e.v) for e in entries if e.v is not None and _ragged(e.v) is None]
    d_k, d_v = _vote(says_k + widths_k), _vote(says_v + widths_v)  # a weight outvoted is the v1 checks' to report
    rows = [len(m) for e in entries for m in (e.k, e.v) if m is not None and _ragged(m) is None and m]
    L_past = _vote(rows + ([len(f.past_tokens)] if f.past_tokens is not None else []))  # most entries say it
    for k, e in enumerate(entries):
        for name, width, what in (("k", d_k, "d_k"), ("v", d_v, "d_v")):
            m = getattr(e, name)
            path: Path = ("cache", k, name)
            if not c.matrix(path, m):
                ok = False
                continue
            if width is not None and _cols(m) != width:
                c.add(path, "v2.cache.width", field=name, found=_cols(m), what=what, expected=width)
                ok = False
            if L_past is not None and len(m) != L_past:
                c.add(path, "v2.cache.rows", field=name, found=len(m), expected=L_past)
                ok = False
    if not ok or L_past is None:
        c.bad.add(("cache",))
        return None
    if f.past_tokens is not None and len(f.past_tokens) != L_past:
        c.add(("past_tokens",), "v2.past_tokens.count", found=len(f.past_tokens), expected=L_past)
        c.bad.add(("past_tokens",))
    c.st.cache = tuple(record.CacheEntry(tuple(map(tuple, e.k)), tuple(map(tuple, e.v))) for e in entries)
    c.st.past_tokens = tuple(f.past_tokens) if f.past_tokens is not None else None
    if f.past_x is not None and c.matrix(("past_x",), f.past_x):
        if len(f.past_x) != L_past:
            c.add(("past_x",), "v2.past_x.rows", found=len(f.past_x), expected=L_past)
            c.bad.add(("past_x",))
        else:  # its width is checked against d_model once the v1 checks have settled it (derived)
            c.st.past_x = tuple(map(tuple, f.past_x))
    return L_past


def _head_sizes(c: _Check, f: Any, G: int | None) -> tuple[list[int], list[int]]:
    """What the weights say of ``(d_k, d_v)``, query weights first: the columns of each w_q and w_k, and of each w_v
    (a fused width divided by its number of heads)."""
    def ok(path: Path, m: Any) -> bool:
        return m is not None and path not in c.bad and _ragged(m) is None

    d_k: list[int] = []
    d_v: list[int] = []
    if isinstance(f.heads, list):
        for i, h in enumerate(f.heads):
            if h is None:
                continue
            d_k += [_cols(getattr(h, n)) for n in ("w_q", "w_k") if ok(("heads", i, n), getattr(h, n))]
            d_v += [_cols(h.w_v)] if ok(("heads", i, "w_v"), h.w_v) else []
        d_k += [len(kv.w_k[0]) for kv in c.st.kv_heads or ()]
        d_v += [len(kv.w_v[0]) for kv in c.st.kv_heads or ()]
    elif isinstance(f.num_heads, int):
        H, groups = f.num_heads, G or f.num_heads
        for name, n, out in (("w_q", H, d_k), ("w_k", groups, d_k), ("w_v", groups, d_v)):
            m = getattr(f, name)
            if ok((name,), m) and _cols(m) % n == 0:
                out.append(_cols(m) // n)
    return d_k, d_v


def _vote(values: list[int]) -> int | None:
    """The value most agree on; ties go to the first given."""
    from collections import Counter

    if not values:
        return None
    count = Counter(values)
    best = max(count.values())
    return next(v for v in values if count[v] == best)


def _masks(c: _Check, f: Any, g: SimpleNamespace, L: int | None, L_k: int | None, cached: bool) -> None:
    """The causal alignments, a sliding window, and (with a cache) the mask and key padding over ``L_past + L`` keys."""
    if isinstance(f.mask, WindowMask):
        _window(c, f, g, L, L_k)
    if isinstance(f.mask, str):
        name = "causal" if f.mask == "causal_upper_left" else f.mask
        if name in ("causal", "causal_lower_right") and (cached or name == "causal_lower_right"):
            c.st.mask_name = name
            g.mask = None
        elif f.mask == "causal_upper_left":
            g.mask = "causal"
        if f.mask in ("causal_upper_left", "causal_lower_right") and not cached and L is not None and L == L_k:
            c.doc.warnings.append(c.doc.problem(("mask",), t("v2.mask.same_alignment", name=f.mask),
                                                t("v2.mask.same_alignment.hint")))
    if not cached:
        return
    if isinstance(f.mask, list):
        g.mask = None
        if c.matrix(("mask",), f.mask) and L is not None and L_k is not None:
            if len(f.mask) != L or _cols(f.mask) != L_k:
                c.add(("mask",), "shape.mask", found=f"[{len(f.mask)} × {_cols(f.mask)}]", L=L, L_k=L_k)
                c.bad.add(("mask",))
            else:
                c.st.mask_matrix = tuple(tuple(r) for r in f.mask)
    old, new = f.key_padding, f.key_padding_mask
    g.key_padding = g.key_padding_mask = None
    for name, v in (("key_padding", old), ("key_padding_mask", new)):
        if v is not None and (name,) not in c.bad and L_k is not None and len(v) != L_k:
            c.add((name,), "v2.padding.count", field=name, found=len(v), L_k=L_k)
            c.bad.add((name,))
    if old is not None and new is not None and ("key_padding",) not in c.bad and ("key_padding_mask",) not in c.bad:
        clash = next((j for j, (real, pad) in enumerate(zip(old, new, strict=True)) if real == pad), None)
        if clash is not None:
            c.add(("key_padding_mask", clash), "key_padding.disagree", old=str(old[clash]).lower(), new=str(new[clash]).lower())
            c.bad.add(("key_padding_mask",))
    if new is not None and ("key_padding_mask",) not in c.bad:
        c.st.padding = tuple(not p for p in new)
    elif old is not None and ("key_padding",) not in c.bad:
        c.st.padding = tuple(old)


def _window(c: _Check, f: Any, g: SimpleNamespace, L: int | None, L_k: int | None) -> None:
    """Issue 23: ``mask: {sliding_window: W, sinks: S}``, built here (bottom-right aligned over the cache's keys
    and the new ones); refused on cross-attention, whose keys have no positions in the queries' sequence.
    A window that holds every key is a warning: the mask is then the causal one."""
    g.mask = None
    W, S = f.mask.sliding_window, f.mask.sinks or 0
    if f.x_kv is not None or ("x_kv",) in c.bad:
        c.add(("mask",), "v3.window.cross")
        c.bad.add(("mask",))
        return
    # a window or a count of sinks is a number of keys: bounded like L_k (a huge one overflowed NumPy's int64)
    for name, n in (("sliding_window", W), ("sinks", S)):
        if n > _MAX_KEYS:
            c.add(("mask", name), "limit", what=name, found=n, limit=_MAX_KEYS)
            c.bad.add(("mask",))
    if ("mask",) in c.bad:
        return
    c.st.window = (W, S)
    if L_k is not None and W >= L_k:
        c.doc.warnings.append(c.doc.problem(("mask", "sliding_window"), t("v3.window.covers", W=W, L_k=L_k),
                                            t("v3.window.covers.hint")))
    if L_k is not None and S >= L_k:
        c.doc.warnings.append(c.doc.problem(("mask", "sinks"), t("v3.sinks.covers", S=S, L_k=L_k),
                                            t("v3.sinks.covers.hint")))


def _bias(c: _Check, f: Any, H: int | None, L: int | None, L_k: int | None, cross: bool) -> None:
    """attn_bias and alibi."""
    if f.alibi:
        if f.attn_bias is not None or ("attn_bias",) in c.bad:
            c.add(("alibi",), "v2.alibi.both")
            c.bad.add(("alibi",))
            return
        if cross:
            c.add(("alibi",), "v2.alibi.cross")
            c.bad.add(("alibi",))
            return
        c.st.alibi = True
        return
    b = f.attn_bias
    if b is None or ("attn_bias",) in c.bad:
        return
    per_head = bool(b) and isinstance(b[0], list) and bool(b[0]) and isinstance(b[0][0], list)
    mats: list[tuple[Path, list[list[Fraction]]]] = [(("attn_bias", h), m) for h, m in enumerate(b)] if per_head \
        else [(("attn_bias",), b)]
    if per_head and H is not None and len(b) != H:
        c.add(("attn_bias",), "v2.bias.count", found=len(b), H=H)
        c.bad.add(("attn_bias",))
        return
    ok = True
    for path, m in mats:
        if not c.matrix(path, m):
            ok = False
            continue
        if L is not None and L_k is not None and (len(m) != L or _cols(m) != L_k):
            c.add(path, "v2.bias.shape", found=f"[{len(m)} × {_cols(m)}]", L=L, L_k=L_k)
            ok = False
    if not ok:
        c.bad.add(("attn_bias",))
        return
    c.st.bias = [m for _, m in mats]


def finish(ex: record.Exercise, st: State) -> record.Exercise:
    """The record the v1 checks built, with the v2 parts of ``st`` (:func:`prepare`) added."""
    changes: dict[str, Any] = {}
    if st.kv_heads is not None and len(st.kv_heads) < ex.num_heads:
        changes["kv_heads"] = st.kv_heads
    if st.cache is not None:
        changes["cache"] = st.cache
        changes["past_tokens"] = st.past_tokens
        changes["past_x"] = st.past_x
    L = ex.L
    L_k = (len(st.cache[0].k) if st.cache else 0) + len(ex.kv)
    if st.mask_name == "causal":
        changes["mask_kind"], changes["mask"] = "causal", record.causal(L, L_k)
    elif st.mask_name == "causal_lower_right":
        changes["mask_kind"], changes["mask"] = "causal_lower_right", record.causal_lower_right(L, L_k)
    elif st.mask_matrix is not None:
        changes["mask_kind"], changes["mask"] = "matrix", st.mask_matrix
    elif st.window is not None:
        changes["mask_kind"], changes["mask"] = "sliding_window", record.sliding_window(L, L_k, *st.window)
        changes["window"], changes["sinks"] = st.window
    if st.padding is not None:
        changes["key_padding"] = st.padding
    H = ex.num_heads
    if st.alibi:
        changes["bias"] = tuple(record.alibi_bias(h, H, L, L_k) for h in range(H))
        changes["alibi"] = True
    elif st.bias is not None:
        mats = [tuple(tuple(r) for r in m) for m in st.bias]
        changes["bias"] = tuple(mats) if len(mats) == H else tuple(mats * H)  # one matrix: every head's
    return dataclasses.replace(ex, **changes) if changes else ex


def derived(ex: record.Exercise, doc: Document) -> list[Problem]:
    """With ``past_x``: each K/V head's cache against the earlier tokens' projections, ``past_x·W_K + b_K``
    and ``past_x·W_V + b_V`` with that head's own weights; the first row that differs, per matrix, is a
    problem at its place in the file (a cache no past input gives makes the decode step's claim, the full
    forward's last rows, false)."""
    if ex.past_x is None or ex.cache is None:
        return []
    past_x = ex.past_x
    if len(past_x[0]) != ex.d_model:  # the width the weights multiply, as the v1 checks settled it
        return [doc.problem(("past_x",), t("v2.past_x.width", found=len(past_x[0]), expected=ex.d_model))]

    def projected(w: record.Matrix, b: record.Vector | None) -> list[list[Fraction]]:
        return [[sum((x * w[i][j] for i, x in enumerate(row)), Fraction(0)) + (b[j] if b is not None else 0)
                 for j in range(len(w[0]))] for row in past_x]  # [L_past, d_model] · [d_model, d] + [d]

    def text(row: Any) -> str:
        return ", ".join(str(v) for v in row)

    problems = []
    for g, entry in enumerate(ex.cache):
        head = ex.heads[ex.sharing(g)[0]]
        for name, w, b, got, weight, what in (("k", head.w_k, head.b_k, entry.k, "W_K", "keys"),
                                              ("v", head.w_v, head.b_v, entry.v, "W_V", "values")):
            want = projected(w, b)
            r = next((r for r, (a, e) in enumerate(zip(got, want, strict=True)) if list(a) != e), None)
            if r is not None:
                weight += f" + b_{weight[-1]}" if b is not None else ""
                problems.append(doc.problem(("cache", g, name, r),
                                            t("v2.past_x.cache", field=name, row=r + 1, found=text(got[r]),
                                              weight=weight, expected=text(want[r]), what=t(f"v2.past_x.{what}")),
                                            t("v2.past_x.cache.hint")))
    return problems
