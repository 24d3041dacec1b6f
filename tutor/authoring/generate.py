"""Write new exercises whose intermediate numbers are small enough for paper.

``generate(Spec(tokens=3, d_model=4, heads=1, d_k=2, seed=7))`` returns the
text of a commented, valid exercise file.  The same spec (same seed) always
gives the same text.

How the numbers stay small: ``x`` holds small integers (``{0, 1}`` at
difficulty 1-2) with no all-zero row, and every column of every weight
matrix has only one or two non-zero entries (``1``, or ``±1`` from
difficulty 2), so each entry of ``Q = x·W_Q`` (and of K and V) is a sum of
at most two small products.  Inputs and weights are drawn from a seeded
:class:`random.Random` (each head's weights until its Q, K, V and scores
``Q·Kᵀ`` stay within the difficulty's bounds and its scores are not all
equal); the first draw within bounds is kept, else the one with the
smallest numbers.  The file says what the ranges turned out to be.

Not dull, unless asked (``allow_dull``): among the draws within bounds the
first one is kept whose heads have no two identical Q rows, no row of
equal scores (uniform weights), and numbers that tell the classic mistakes
apart where the shape allows -- scores that are not symmetric (``K·Qᵀ``
shows), weights that a softmax down the columns does not give, ``K ≠ V``,
a square W_O that is not symmetric (``W_Oᵀ`` shows).  A missing or wrong
scaling shows by itself when ``d_k ≠ 1`` and ``d_k ≠ d_model``, which is
the shape's to allow.

:func:`like` draws fresh numbers for the shape of an existing exercise
(``attn-tutor new --like ID``, ``practice ID --fresh``).  Pure: no printing,
no files.
"""

from __future__ import annotations

import math
import random
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..base.messages import plural, t
from ..exercise.checks import LIMITS

if TYPE_CHECKING:
    from ..exercise.record import Exercise

MASKS = ("none", "causal", "padding")
V2_MASKS = ("causal_lower_right",)  # with --cache or --cross (tutor.authoring.generate_v2)
TRIES = 200  # ten times the inputs x drawn at most, fewer for big exercises (see _x_tries)
WORK = 3_000_000  # multiplications spent on candidates at most


@dataclass(frozen=True)
class Spec:
    """What to generate.  ``cross`` is ``L_k`` for cross-attention (K and V from ``x_kv``), else ``None``;
    ``allow_dull``: keep the first numbers within bounds even when they are dull (see :func:`generate`)."""

    tokens: int = 3
    d_model: int = 4
    heads: int = 1
    d_k: int = 2
    mask: str = "none"
    cross: int | None = None
    seed: int = 0
    difficulty: int | None = None
    id: str | None = None
    title: str | None = None
    allow_dull: bool = False
    kv_heads: int | None = None  # format v2 (tutor.authoring.generate_v2): grouped K/V heads, a KV cache, ALiBi
    cache: int | None = None
    alibi: bool = False

    def check(self) -> None:
        """Raise ``ValueError`` when a size is outside the format's limits or the mask is unknown."""
        for name, value, limit in (("tokens", self.tokens, LIMITS["L"]), ("d_model", self.d_model, LIMITS["d_model"]),
                                   ("heads", self.heads, LIMITS["heads"]), ("d_k", self.d_k, LIMITS["d_k"]),
                                   ("cross", self.cross or 1, LIMITS["L_k"]), ("difficulty", self.difficulty or 1, 5)):
            if not 1 <= value <= limit:
                raise ValueError(f"{name} must be between 1 and {limit}, found {value}")
        if self.heads * self.d_k > LIMITS["d_out"]:
            raise ValueError(f"heads x d_k must be at most {LIMITS['d_out']} (the heads are concatenated into the output), "
                             f"found {self.heads} x {self.d_k} = {self.heads * self.d_k}")
        if self.mask not in MASKS + V2_MASKS:
            raise ValueError(f"mask must be one of {', '.join(MASKS)}, found {self.mask!r}")
        if self.mask == "padding" and (self.cross or self.tokens) + (self.cache or 0) < 2:
            raise ValueError("padding needs at least two keys: one to pad and one to attend")
        from .generate_v2 import check_v2, is_v2

        if is_v2(self):
            check_v2(self)

    @property
    def level(self) -> int:
        """The difficulty: given, else 1 plus one for each of several heads, a mask, cross-attention."""
        if self.difficulty is not None:
            return self.difficulty
        return min(5, 1 + (self.heads > 1) + (self.mask != "none") + (self.cross is not None)
                   + (self.cache is not None) + self.alibi)

    @property
    def L_k(self) -> int:
        """The number of keys: ``cross``, else ``tokens``."""
        return self.cross if self.cross is not None else self.tokens


@dataclass(frozen=True)
class Level:
    """What a difficulty allows: the values of x and of the weights, and the bounds kept on Q, K, V and scores."""

    x: tuple[int, ...]  # values of x, repeated to weight them
    w: tuple[int, ...]  # non-zero values of the weights
    qkv: int  # bound on |Q|, |K|, |V|
    scores: int  # bound on |scores| for d_k <= 2

    def score_bound(self, d_k: int) -> int:
        """The bound on |scores|: a score is a sum of d_k products, so it grows with every two more terms."""
        return self.scores * max(1, (d_k + 1) // 2)


LEVELS = {
    1: Level((0, 1, 1), (1,), 2, 4),
    2: Level((0, 1, 1), (1, 1, -1), 2, 4),
    3: Level((0, 0, 1, 1, 2), (1, 1, -1), 3, 6),
    4: Level((-1, 0, 0, 1, 1, 2), (1, 1, -1), 3, 8),
    5: Level((-2, -1, 0, 1, 1, 2), (1, -1, 2), 4, 12),
}

Matrix = list[list[int]]
T = TypeVar("T")


def _matmul(a: Matrix, b: Matrix) -> Matrix:
    """``[n, m] @ [m, p] -> [n, p]`` on Python ints."""
    cols = list(zip(*b))  # [p][m]
    return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def _inputs(rng: random.Random, rows: int, cols: int, values: Sequence[int]) -> Matrix:
    """``[rows, cols]`` entries from ``values``; no all-zero row."""
    out = []
    for _ in range(rows):
        row = [0] * cols
        while not any(row):
            row = [values[rng.randrange(len(values))] for _ in range(cols)]
        out.append(row)
    return out


def _weight(rng: random.Random, d_in: int, d_out: int, values: Sequence[int]) -> Matrix:
    """``[d_in, d_out]``: each column has one or two non-zero entries."""
    w = [[0] * d_out for _ in range(d_in)]
    for c in range(d_out):
        k = 1 if d_in == 1 else 1 + rng.randrange(2)
        for r in rng.sample(range(d_in), k):
            w[r][c] = values[rng.randrange(len(values))]
    return w


@dataclass(frozen=True)
class HeadShape:
    """One head's sizes and which biases it has."""

    d_k: int
    d_v: int
    b_q: bool = False
    b_k: bool = False
    b_v: bool = False


@dataclass(frozen=True)
class Shape:
    """Everything an exercise is but its numbers: sizes, labels, masks, which biases and W_O it has.

    ``d_kv`` and ``kv_tokens`` only for cross-attention (``x_kv``); ``mask``
    is ``"none"``, ``"causal"``, or a matrix ``[L, L_k]`` (True = may attend);
    ``w_o`` the number of columns of W_O (``d_out``), ``None`` without one.
    """

    L: int
    d_model: int
    heads: tuple[HeadShape, ...]
    tokens: tuple[str, ...]
    L_k: int | None = None
    d_kv: int | None = None
    kv_tokens: tuple[str, ...] | None = None
    mask: str | tuple[tuple[bool, ...], ...] = "none"
    key_padding: tuple[bool, ...] | None = None
    w_o: int | None = None
    b_o: bool = False
    fused: bool = False  # written in the fused form (one w_q, w_k, w_v for all heads), as the exercise it is like

    @property
    def keys(self) -> int:
        """``L_k``: the number of keys."""
        return self.L_k if self.L_k is not None else self.L

    @property
    def cross(self) -> bool:
        return self.L_k is not None

    def allowed(self) -> tuple[tuple[bool, ...], ...] | None:
        """``[L, L_k]`` booleans, True = may attend (mask AND key padding), or ``None`` without either."""
        if self.mask == "none" and self.key_padding is None:
            return None
        mask = self.mask
        rows = []
        for i in range(self.L):
            row = []
            for j in range(self.keys):
                seen = True if mask == "none" else (j <= i if mask == "causal" else bool(mask[i][j]))
                row.append(seen and (self.key_padding is None or self.key_padding[j]))
            rows.append(tuple(row))
        return tuple(rows)


def _spec_shape(spec: Spec) -> Shape:
    """The shape ``new --tokens … --mask …`` asks for: labels ``t1 …`` (``s1 …`` for x_kv), the last key PAD with padding."""
    tokens = [f"t{i + 1}" for i in range(spec.tokens)]
    kv_tokens = [f"s{j + 1}" for j in range(spec.L_k)] if spec.cross is not None else None
    padding = None
    if spec.mask == "padding":
        padding = (True,) * (spec.L_k - 1) + (False,)
        if kv_tokens is not None:
            kv_tokens[-1] = "PAD"
        else:
            tokens[-1] = "PAD"
    return Shape(L=spec.tokens, d_model=spec.d_model, heads=(HeadShape(spec.d_k, spec.d_k),) * spec.heads,
                 tokens=tuple(tokens), L_k=spec.cross, d_kv=spec.d_model if spec.cross is not None else None,
                 kv_tokens=None if kv_tokens is None else tuple(kv_tokens),
                 mask="causal" if spec.mask == "causal" else "none", key_padding=padding)


def _transposed(m: Sequence[Sequence[T]]) -> list[list[T]]:
    return [list(c) for c in zip(*m)]


def _row_softmax(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    """Each row's softmax over its finite entries (``-inf`` blocked; a row of nothing but ``-inf`` is 0).
    Only to compare two ways of normalising here; the tutor's softmax is :func:`tutor.numeric.softmax`."""
    out = []
    for row in rows:
        live = [v for v in row if v != -math.inf]
        top = max(live, default=0.0)
        e = [0.0 if v == -math.inf else math.exp(v - top) for v in row]
        z = sum(e) or 1.0
        out.append([x / z for x in e])
    return out


def _dull(q: Matrix, k: Matrix, v: Matrix, s: Matrix, d_k: int, allowed: tuple[tuple[bool, ...], ...] | None) -> int:
    """How dull a head is: two identical Q rows, a row of equal scores (uniform weights), and each
    classic mistake its numbers cannot tell apart -- K·Qᵀ (symmetric scores), a softmax down the
    columns (it gives the same weights), weights·K (K = V)."""
    n = int(len({tuple(r) for r in q}) < len(q))
    L, L_k = len(s), len(s[0])
    for i, row in enumerate(s):
        live = [x for j, x in enumerate(row) if allowed is None or allowed[i][j]]
        n += int(len(live) >= 2 and len(set(live)) == 1)
    if L == L_k and s == _transposed(s):
        n += 1
    if k == v:
        n += 1
    a = [[x / math.sqrt(d_k) if allowed is None or allowed[i][j] else -math.inf for j, x in enumerate(row)]
         for i, row in enumerate(s)]  # [L, L_k]
    rows, cols = _row_softmax(a), _transposed(_row_softmax(_transposed(a)))
    if all(abs(x - y) <= 1e-9 for r, c in zip(rows, cols) for x, y in zip(r, c)):
        n += 1
    return n


@dataclass(frozen=True)
class _Head:
    w: tuple[Matrix, Matrix, Matrix]  # w_q, w_k, w_v
    b: tuple[list[int] | None, list[int] | None, list[int] | None]  # b_q, b_k, b_v
    qkv: tuple[int, int]  # smallest and largest entry of Q, K, V
    scores: tuple[int, int]  # smallest and largest score
    flat: bool  # the scores are all equal (and need not be), or V is all zero
    dull: int  # see _dull (0 when dull exercises are allowed)
    out: tuple[tuple[float, ...], ...] = ()  # the head's output in floats [L, d_v] (only to compare heads)

    def cost(self, level: Level) -> tuple[int, int, int, int, int]:
        """Lexicographic: flat first, then how far past the bounds, then how dull, then the largest score and entry."""
        q = max(abs(v) for v in self.qkv)
        s = max(abs(v) for v in self.scores)
        d_k = len(self.w[0][0])
        return (int(self.flat), max(0, q - level.qkv) + max(0, s - level.score_bound(d_k)), self.dull, s, q)


@dataclass(frozen=True)
class _Candidate:
    x: Matrix
    x_kv: Matrix | None
    heads: tuple[_Head, ...]
    w_o: Matrix | None = None
    b_o: list[int] | None = None

    def cost(self, level: Level) -> tuple[int, ...]:
        """The heads' costs combined: any flat head, the total excess over the bounds, dullness (with
        heads whose order cannot be told: the concatenation read backwards is the same), the largest numbers."""
        costs = [h.cost(level) for h in self.heads]
        outs = [h.out for h in self.heads]
        mirrored = len(outs) > 1 and all(outs) and all(
            abs(a - b) <= 1e-9 for o, r in zip(outs, outs[::-1]) for ra, rb in zip(o, r) for a, b in zip(ra, rb))
        return (max(c[0] for c in costs), sum(c[1] for c in costs), sum(c[2] for c in costs) + int(mirrored),
                max(c[3] for c in costs), max(c[4] for c in costs))

    @property
    def qkv(self) -> tuple[int, int]:
        """Smallest and largest entry of Q, K, V over all heads."""
        return min(h.qkv[0] for h in self.heads), max(h.qkv[1] for h in self.heads)

    @property
    def scores(self) -> tuple[int, int]:
        """Smallest and largest score over all heads."""
        return min(h.scores[0] for h in self.heads), max(h.scores[1] for h in self.heads)


def _bias(rng: random.Random, n: int, level: Level) -> list[int]:
    """A bias ``[n]``: mostly 0, else a value the weights use."""
    values = (0, 0) + level.w
    return [values[rng.randrange(len(values))] for _ in range(n)]


def _plus(m: Matrix, b: list[int] | None) -> Matrix:
    return m if b is None else [[x + y for x, y in zip(row, b)] for row in m]


def _head(rng: random.Random, x: Matrix, kv: Matrix, shape: Shape, hs: HeadShape, level: Level,
          allow_dull: bool) -> _Head:
    d_kv = len(kv[0])
    w_q, w_k = _weight(rng, shape.d_model, hs.d_k, level.w), _weight(rng, d_kv, hs.d_k, level.w)  # [d, d_k]
    w_v = _weight(rng, d_kv, hs.d_v, level.w)  # [d_kv, d_v]
    b = (_bias(rng, hs.d_k, level) if hs.b_q else None, _bias(rng, hs.d_k, level) if hs.b_k else None,
         _bias(rng, hs.d_v, level) if hs.b_v else None)
    q, k, v = _plus(_matmul(x, w_q), b[0]), _plus(_matmul(kv, w_k), b[1]), _plus(_matmul(kv, w_v), b[2])
    s = _matmul(q, [list(c) for c in zip(*k)])  # [L, d_k]·[d_k, L_k] -> [L, L_k]
    qkv = [e for m in (q, k, v) for row in m for e in row]
    scores = [e for row in s for e in row]
    same_inputs = all(r == x[0] for r in x) and all(r == kv[0] for r in kv)  # then equal scores cannot be avoided
    flat = (len(set(scores)) == 1 and len(scores) > 1 and not same_inputs) or not any(e for row in v for e in row)
    if allow_dull:
        return _Head((w_q, w_k, w_v), b, (min(qkv), max(qkv)), (min(scores), max(scores)), flat, 0)
    allowed = shape.allowed()
    a = [[x / math.sqrt(hs.d_k) if allowed is None or allowed[i][j] else -math.inf for j, x in enumerate(row)]
         for i, row in enumerate(s)]  # [L, L_k]
    out = tuple(tuple(sum(w * vr[c] for w, vr in zip(wr, v)) for c in range(hs.d_v)) for wr in _row_softmax(a))  # [L, d_v]
    return _Head((w_q, w_k, w_v), b, (min(qkv), max(qkv)), (min(scores), max(scores)), flat,
                 _dull(q, k, v, s, hs.d_k, allowed), out)


HEAD_TRIES = 40  # weight draws per head for one x
W_O_TRIES = 20  # draws of a square W_O until it is not symmetric


def _x_tries(shape: Shape) -> int:
    """How many inputs x to draw: fewer when one head's draws cost many multiplications (:data:`WORK`)."""
    L, L_k, d = shape.L, shape.keys, shape.d_model
    d_kv = shape.d_kv or d
    per_head = sum(L * d * h.d_k + L_k * d_kv * (h.d_k + h.d_v) + L * L_k * h.d_k for h in shape.heads)  # Q, K, V, scores
    return max(1, min(TRIES // 10, WORK // (HEAD_TRIES * per_head)))


def _w_o(rng: random.Random, shape: Shape, level: Level, allow_dull: bool) -> tuple[Matrix | None, list[int] | None]:
    """W_O ``[Σ d_v, d_out]`` (a square one not symmetric, so that W_Oᵀ gives another output) and b_O."""
    if shape.w_o is None:
        return None, None
    rows = sum(h.d_v for h in shape.heads)
    w = _weight(rng, rows, shape.w_o, level.w)
    for _ in range(W_O_TRIES):
        if allow_dull or rows != shape.w_o or w != _transposed(w):
            break
        w = _weight(rng, rows, shape.w_o, level.w)
    return w, _bias(rng, shape.w_o, level) if shape.b_o else None


def _pick(shape: Shape, level: Level, seed: int, allow_dull: bool = False) -> _Candidate:
    """Draw x, then each head's weights until that head is within bounds (and not dull); the first x
    whose heads all are wins."""
    rng = random.Random(seed)
    best: _Candidate | None = None
    for _ in range(_x_tries(shape)):
        x = _inputs(rng, shape.L, shape.d_model, level.x)  # [L, d_model]
        x_kv = _inputs(rng, shape.keys, shape.d_kv or shape.d_model, level.x) if shape.cross else None  # [L_k, d_kv]
        kv = x_kv if x_kv is not None else x
        heads = []
        for hs in shape.heads:
            head = _head(rng, x, kv, shape, hs, level, allow_dull)
            for _ in range(HEAD_TRIES - 1):
                if head.cost(level)[:3] == (0, 0, 0):
                    break
                other = _head(rng, x, kv, shape, hs, level, allow_dull)
                if other.cost(level) < head.cost(level):
                    head = other
            heads.append(head)
        c = _Candidate(x, x_kv, tuple(heads))
        if c.cost(level)[:3] == (0, 0, 0):
            best = c
            break
        if best is None or c.cost(level) < best.cost(level):
            best = c
    assert best is not None
    w_o, b_o = _w_o(rng, shape, level, allow_dull)
    return _Candidate(best.x, best.x_kv, best.heads, w_o, b_o)


# --- the file ------------------------------------------------------------------

def _word(n: int) -> str:
    """``n`` as the catalogue spells it in a title (``three``, up to eight), else its digits."""
    try:
        return t(f"new.number.{n}")
    except KeyError:
        return str(n)


def default_id(spec: Spec) -> str:
    """``gen-3x4-h1-dk2-s7`` (+ ``-causal``/``-padding``, ``-cross3``)."""
    parts = [f"gen-{spec.tokens}x{spec.d_model}-h{spec.heads}-dk{spec.d_k}"]
    if spec.mask != "none":
        parts.append(spec.mask)
    if spec.cross is not None:
        parts.append(f"cross{spec.cross}")
    parts.append(f"s{spec.seed}")
    from .generate_v2 import default_id_v2, is_v2

    return default_id_v2(spec, "-".join(parts).replace("_", "-")) if is_v2(spec) else "-".join(parts)


def default_title(spec: Spec) -> str:
    """``Three tokens, d_model = 4, one head with d_k = 2`` and the mask or cross-attention."""
    title = t("new.title", tokens=plural("new.title.tokens", spec.tokens, word=_word(spec.tokens)), d_model=spec.d_model,
              heads=plural("new.title.heads", spec.heads, word=_word(spec.heads)), d_k=spec.d_k)
    if spec.cross is not None:
        title += plural("new.title.cross", spec.cross)
    if spec.mask == "causal":
        title += t("new.title.causal")
    elif spec.mask == "padding":
        title += t("new.title.padding")
    from .generate_v2 import is_v2, title_v2

    if is_v2(spec):
        title += title_v2(spec)
    return title[:1].upper() + title[1:]


def _row(values: Sequence[int], width: int) -> str:
    return "[" + ", ".join(f"{v:>{width}}" for v in values) + "]"


def _matrix(m: Matrix, indent: int) -> str:
    """Flow-style rows, one per line, aligned under the first: ``[[1, 0],\\n    [0, 1]]``."""
    width = max(len(str(v)) for row in m for v in row)
    pad = " " * (indent + 1)
    return "[" + f",\n{pad}".join(_row(r, width) for r in m) + "]"


def _quote(text: str) -> str:
    """A YAML double-quoted scalar on one line (a newline becomes a space)."""
    one_line = " ".join(text.split())
    return '"' + one_line.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _range(lo: int, hi: int) -> str:
    return t("new.file.range", lo=lo, hi=hi) if lo != hi else str(lo)


def _comment(text: str, indent: str = "") -> list[str]:
    """``text`` as YAML comment lines, each of its lines behind ``# ``."""
    return [f"{indent}# {line}" for line in text.split("\n")]


def _scale(d_k: int) -> str:
    """What dividing by ``sqrt(d_k)`` does to the numbers, for the file's opening comment."""
    if d_k in (1, 4):
        return t("new.file.scale.1") if d_k == 1 else t("new.file.scale.4")
    if d_k in (9, 16):
        return t("new.file.scale.square", d_k=d_k, root=math.isqrt(d_k))
    return t("new.file.scale.surd", root=f"sqrt({d_k})")


def command_line(spec: Spec) -> str:
    """The ``attn-tutor new`` command that writes this exercise again."""
    parts = ["attn-tutor new", f"--tokens {spec.tokens}", f"--d-model {spec.d_model}", f"--heads {spec.heads}",
             f"--d-k {spec.d_k}", f"--mask {spec.mask}"]
    if spec.cross is not None:
        parts.append(f"--cross {spec.cross}")
    if spec.difficulty is not None:
        parts.append(f"--difficulty {spec.difficulty}")
    parts.append(f"--seed {spec.seed}")
    if spec.allow_dull:
        parts.append("--allow-dull")
    return " ".join(parts)


def generate(spec: Spec) -> str:
    """The text of a new, commented exercise file for ``spec`` (deterministic for its seed).

    Unless ``spec.allow_dull``, the numbers avoid dull exercises (two
    identical Q rows, a row of equal scores) and tell the classic mistakes
    apart where the shape allows (:func:`_dull`).  Raises ``ValueError`` for
    a spec outside the format's limits.
    """
    spec.check()
    from .generate_v2 import generate_v2, is_v2

    if is_v2(spec):  # format v2: --kv-heads, --cache, --mask causal_lower_right, --alibi
        return generate_v2(spec, spec.id or default_id(spec), spec.title or default_title(spec))
    shape = _spec_shape(spec)
    c = _pick(shape, LEVELS[spec.level], spec.seed, spec.allow_dull)
    tags = ["generated", "single-head" if spec.heads == 1 else "multi-head"]
    tags += {"causal": ["mask", "causal"], "padding": ["mask", "padding"]}.get(spec.mask, [])
    tags += ["cross-attention"] if spec.cross is not None else []
    return _text(shape, c, id=spec.id or default_id(spec), title=spec.title or default_title(spec),
                 description=t("new.file.description.text", seed=spec.seed), command=command_line(spec),
                 tags=tags, difficulty=spec.level)


# --- fresh numbers for an exercise: new --like, practice --fresh -------------------------------


def shape_of(ex: Exercise) -> Shape:
    """The shape of exercise ``ex``: its sizes, labels, mask and key padding, which biases and W_O it has,
    and its form (per-head or fused)."""
    heads = tuple(HeadShape(h.d_k, h.d_v, h.b_q is not None, h.b_k is not None, h.b_v is not None) for h in ex.heads)
    mask: str | tuple[tuple[bool, ...], ...] = "none"
    if ex.mask_kind == "causal":
        mask = "causal"
    elif ex.mask is not None:
        mask = ex.mask
    return Shape(L=ex.L, d_model=ex.d_model, heads=heads, tokens=ex.query_labels,
                 L_k=ex.L_k if ex.is_cross else None, d_kv=len(ex.kv[0]) if ex.is_cross else None,
                 kv_tokens=ex.key_labels if ex.is_cross else None, mask=mask, key_padding=ex.key_padding,
                 w_o=ex.d_out if ex.w_o is not None else None, b_o=ex.b_o is not None, fused=ex.fused)


def like_id(ex: Exercise, seed: int) -> str:
    """``single-head-3x4-s7``: the id of the exercise ``new --like`` draws (at most 64 characters)."""
    tail = f"-s{seed}"
    return ex.id[:64 - len(tail)].rstrip("-") + tail


def like(ex: Exercise, seed: int, *, allow_dull: bool = False, id: str | None = None, title: str | None = None,
         source: str | None = None) -> str:
    """The text of a new exercise with ``ex``'s shape (:func:`shape_of`: the same tokens, sizes, heads,
    mask, key padding, biases and W_O) and fresh small integers drawn from ``seed``.

    The numbers follow ``ex``'s difficulty (1 when it has none) and the
    rules of :func:`generate`: Q, K, V and the scores are small integers,
    and the exercise is not dull unless ``allow_dull``.  Deterministic for
    ``(ex, seed)``.  ``source``: how the command written in the file names
    ``ex`` (its file, its pack option), when its id alone would not find it.
    Raises ``ValueError`` when ``ex`` is beyond the format's limits, and
    :class:`~tutor.base.errors.ShapeError` (a ``ValueError``) when ``ex`` uses format
    v2 (grouped K/V heads, a cache, a bias): its shape is not drawn afresh.
    """
    if ex.is_v2:
        from ..base.errors import ShapeError

        raise ShapeError(t("new.like.v2", id=ex.id))
    shape = shape_of(ex)
    level = ex.difficulty or 1
    c = _pick(shape, LEVELS[level], seed, allow_dull)
    tags = ["generated", *(tag for tag in ex.tags if tag != "generated")]
    command = f"attn-tutor new --like {source or ex.id} --seed {seed}" + (" --allow-dull" if allow_dull else "")
    return _text(shape, c, id=id or like_id(ex, seed), title=title or t("new.like.title", title=ex.title),
                 description=t("new.like.description", id=ex.id, seed=seed), command=command, tags=tags,
                 difficulty=level)


def fresh(ex: Exercise, seed: int) -> Exercise:
    """Exercise ``ex`` with fresh numbers (:func:`like`, the same seed as ``new --like``), keeping ``ex``'s
    id so that practice on it is recorded under the original exercise."""
    from ..exercise import parse_exercise

    return parse_exercise(like(ex, seed, id=ex.id), f"{ex.id} --fresh --seed {seed}")


# --- the file ------------------------------------------------------------------------------


_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def _label(text: str) -> str:
    """A token label in a YAML list: plain when YAML reads it back as that text, else double-quoted."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", text) and text.lower() not in _YAML_WORDS:
        return text
    return _quote(text)


def _vector(v: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, v)) + "]"


def _text(shape: Shape, c: _Candidate, *, id: str, title: str, description: str, command: str,
          tags: Sequence[str], difficulty: int) -> str:
    """The commented exercise file for candidate ``c`` of ``shape``."""
    L, d = shape.L, shape.d_model
    x_values = sorted({v for row in c.x + (c.x_kv or []) for v in row})
    w_values = sorted({v for head in c.heads for m in head.w for row in m for v in row}
                      | {v for row in c.w_o or [] for v in row})
    d_ks = sorted({h.d_k for h in shape.heads})
    why = t("new.file.why", x_values=", ".join(map(str, x_values)), w_values=", ".join(str(v) for v in w_values if v),
            qkv=_range(*c.qkv), scores=_range(*c.scores), scale="; ".join(_scale(d_k) for d_k in d_ks))
    if any(b is not None for head in c.heads for b in head.b) or c.b_o is not None:
        why += " " + t("new.file.why.bias")
    out = [
        *_comment(t("new.file.written_by", command=command)),
        "#",
        *textwrap.wrap(why, 78, initial_indent="# ", subsequent_indent="# "),
        "#",
        *_comment(t("new.file.check")),
        "",
        *_comment(t("new.file.id")),
        f"id: {id}",
        *_comment(t("new.file.title")),
        f"title: {_quote(title)}",
        *_comment(t("new.file.description")),
        "description: |",
        *(f"  {line}" for line in description.split("\n")),
        *_comment(t("new.file.tokens")),
        f"tokens: [{', '.join(_label(s) for s in shape.tokens)}]",
        *_comment(t("new.file.x", L=L, d_model=d)),
        f"x: {_matrix(c.x, 3)}",
    ]
    if c.x_kv is not None:
        out += [
            *_comment(t("new.file.kv_tokens")),
            f"kv_tokens: [{', '.join(_label(s) for s in shape.kv_tokens or ())}]",
            *_comment(t("new.file.x_kv", L_k=shape.keys, d_model=shape.d_kv or d)),
            f"x_kv: {_matrix(c.x_kv, 6)}",
        ]
    src = "x_kv" if c.x_kv is not None else "x"
    h0 = shape.heads[0]
    if shape.fused:
        out += _fused(shape, c, src)
    elif all(h.d_k == h0.d_k == h.d_v for h in shape.heads) and (shape.d_kv or d) == d:
        out += [*_comment(t("new.file.heads", src=src, d_model=d, d_k=h0.d_k)), "heads:"]
    else:
        out += [*_comment(t("new.file.heads.sizes", src=src)), "heads:"]
    for h, (head, hs) in enumerate(zip(c.heads, shape.heads) if not shape.fused else ()):
        w_q, w_k, w_v = head.w
        out += [*_comment(t("new.file.head", head=h + 1) if hs.d_k == hs.d_v == h0.d_k else
                          t("new.file.head.sized", head=h + 1, d_k=hs.d_k, d_v=hs.d_v), indent="  "),
                f"  - w_q: {_matrix(w_q, 9)}",
                f"    w_k: {_matrix(w_k, 9)}",
                f"    w_v: {_matrix(w_v, 9)}"]
        for name, b in zip(("b_q", "b_k", "b_v"), head.b):
            if b is not None:
                out.append(f"    {name}: {_vector(b)}")
    if c.w_o is not None:
        out += [*_comment(t("new.file.w_o", rows=len(c.w_o), d_out=len(c.w_o[0]))), f"w_o: {_matrix(c.w_o, 5)}"]
        if c.b_o is not None:
            out += [*_comment(t("new.file.b_o")), f"b_o: {_vector(c.b_o)}"]
    if shape.mask == "causal":
        out += [*_comment(t("new.file.mask")), "mask: causal"]
    elif shape.mask != "none":
        rows = ["[" + ", ".join("true" if a else "false" for a in row) + "]" for row in shape.mask]
        out += [*_comment(t("new.file.mask.matrix")), "mask: [" + ",\n       ".join(rows) + "]"]
    if shape.key_padding is not None:  # PyTorch's polarity: true = a padding key
        out += [*_comment(t("new.file.key_padding_mask")),
                f"key_padding_mask: [{', '.join('false' if real else 'true' for real in shape.key_padding)}]"]
    out += [
        *_comment(t("new.file.tags")),
        f"tags: [{', '.join(_label(tag) for tag in tags)}]",
        *_comment(t("new.file.difficulty")),
        f"difficulty: {difficulty}",
        "",
    ]
    return "\n".join(out)


def _fused(shape: Shape, c: _Candidate, src: str) -> list[str]:
    """The weights in the fused form: ``num_heads`` and one ``w_q``, ``w_k``, ``w_v`` (and bias) whose
    columns are the heads' side by side (head h: columns h·d_k to (h+1)·d_k), as in the exercise it is like."""
    H, d_k, d_v = len(shape.heads), shape.heads[0].d_k, shape.heads[0].d_v
    out = [*_comment(t("new.file.fused", src=src, d_model=shape.d_model, d_kv=shape.d_kv or shape.d_model,
                       heads=H, d_k=d_k, d_v=d_v, wk=H * d_k, wv=H * d_v)),
           f"num_heads: {H}"]
    for n, name in enumerate(("w_q", "w_k", "w_v")):
        joined = [[e for head in c.heads for e in head.w[n][r]] for r in range(len(c.heads[0].w[n]))]  # [d, H·d_k]
        out.append(f"{name}: {_matrix(joined, len(name) + 2)}")
    biases = [(name, [head.b[n] for head in c.heads]) for n, name in enumerate(("b_q", "b_k", "b_v"))]
    biases = [(name, parts) for name, parts in biases if all(b is not None for b in parts)]
    if biases:
        out += _comment(t("new.file.fused.bias"))
    out += [f"{name}: {_vector([e for b in parts for e in b or ()])}" for name, parts in biases]
    return out
