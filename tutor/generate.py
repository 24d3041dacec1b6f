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
smallest numbers.  The file says what
the ranges turned out to be.  Pure: no printing, no files.
"""

from __future__ import annotations

import math
import random
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from .exercise.checks import LIMITS
from .messages import plural, t

MASKS = ("none", "causal", "padding")
V2_MASKS = ("causal_lower_right",)  # with --cache or --cross (tutor.generate_llm)
TRIES = 200  # ten times the inputs x drawn at most, fewer for big exercises (see _x_tries)
WORK = 3_000_000  # multiplications spent on candidates at most


@dataclass(frozen=True)
class Spec:
    """What to generate.  ``cross`` is ``L_k`` for cross-attention (K and V from ``x_kv``), else ``None``."""

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
    kv_heads: int | None = None  # format v2 (tutor.generate_llm): grouped K/V heads, a KV cache, ALiBi
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
        from .generate_llm import check_v2, is_v2

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
class _Head:
    w: tuple[Matrix, Matrix, Matrix]  # w_q, w_k, w_v
    qkv: tuple[int, int]  # smallest and largest entry of Q, K, V
    scores: tuple[int, int]  # smallest and largest score
    flat: bool  # the scores are all equal (and need not be), or V is all zero

    def cost(self, level: Level) -> tuple[int, int, int, int]:
        """Lexicographic: flat first, then how far past the bounds, then the largest score and entry."""
        q = max(abs(v) for v in self.qkv)
        s = max(abs(v) for v in self.scores)
        d_k = len(self.w[0][0])
        return (int(self.flat), max(0, q - level.qkv) + max(0, s - level.score_bound(d_k)), s, q)


@dataclass(frozen=True)
class _Candidate:
    x: Matrix
    x_kv: Matrix | None
    heads: tuple[_Head, ...]

    def cost(self, level: Level) -> tuple[int, ...]:
        """The heads' costs combined: any flat head, the total excess over the bounds, the largest numbers."""
        costs = [h.cost(level) for h in self.heads]
        return (max(c[0] for c in costs), sum(c[1] for c in costs), max(c[2] for c in costs), max(c[3] for c in costs))

    @property
    def qkv(self) -> tuple[int, int]:
        """Smallest and largest entry of Q, K, V over all heads."""
        return min(h.qkv[0] for h in self.heads), max(h.qkv[1] for h in self.heads)

    @property
    def scores(self) -> tuple[int, int]:
        """Smallest and largest score over all heads."""
        return min(h.scores[0] for h in self.heads), max(h.scores[1] for h in self.heads)


def _head(rng: random.Random, x: Matrix, kv: Matrix, spec: Spec, level: Level) -> _Head:
    w_q, w_k, w_v = (_weight(rng, spec.d_model, spec.d_k, level.w) for _ in range(3))  # [d, d_k] each
    q, k, v = _matmul(x, w_q), _matmul(kv, w_k), _matmul(kv, w_v)  # [L, d_k], [L_k, d_k], [L_k, d_k]
    s = _matmul(q, [list(c) for c in zip(*k)])  # [L, d_k]·[d_k, L_k] -> [L, L_k]
    qkv = [e for m in (q, k, v) for row in m for e in row]
    scores = [e for row in s for e in row]
    same_inputs = all(r == x[0] for r in x) and all(r == kv[0] for r in kv)  # then equal scores cannot be avoided
    flat = (len(set(scores)) == 1 and len(scores) > 1 and not same_inputs) or not any(e for row in v for e in row)
    return _Head((w_q, w_k, w_v), (min(qkv), max(qkv)), (min(scores), max(scores)), flat)


HEAD_TRIES = 40  # weight draws per head for one x


def _x_tries(spec: Spec) -> int:
    """How many inputs x to draw: fewer when one head's draws cost many multiplications (:data:`WORK`)."""
    L, L_k, d, d_k = spec.tokens, spec.L_k, spec.d_model, spec.d_k
    per_head = L * d * d_k + 2 * L_k * d * d_k + L * L_k * d_k  # Q, K, V, then scores
    return max(1, min(TRIES // 10, WORK // (spec.heads * HEAD_TRIES * per_head)))


def _pick(spec: Spec) -> _Candidate:
    """Draw x, then each head's weights until that head is within bounds; the first x whose heads all are wins."""
    rng = random.Random(spec.seed)
    level = LEVELS[spec.level]
    best: _Candidate | None = None
    for _ in range(_x_tries(spec)):
        x = _inputs(rng, spec.tokens, spec.d_model, level.x)  # [L, d_model]
        x_kv = _inputs(rng, spec.cross, spec.d_model, level.x) if spec.cross is not None else None  # [L_k, d_kv]
        kv = x_kv if x_kv is not None else x
        heads = []
        for _ in range(spec.heads):
            head = _head(rng, x, kv, spec, level)
            for _ in range(HEAD_TRIES - 1):
                if head.cost(level)[:2] == (0, 0):
                    break
                other = _head(rng, x, kv, spec, level)
                if other.cost(level) < head.cost(level):
                    head = other
            heads.append(head)
        c = _Candidate(x, x_kv, tuple(heads))
        if c.cost(level)[:2] == (0, 0):
            return c
        if best is None or c.cost(level) < best.cost(level):
            best = c
    assert best is not None
    return best


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
    from .generate_llm import default_id_v2, is_v2

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
    from .generate_llm import is_v2, title_v2

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
    return " ".join(parts)


def generate(spec: Spec) -> str:
    """The text of a new, commented exercise file for ``spec`` (deterministic for its seed).

    Raises ``ValueError`` for a spec outside the format's limits.
    """
    spec.check()
    from .generate_llm import generate_v2, is_v2

    if is_v2(spec):
        return generate_v2(spec, spec.id or default_id(spec), spec.title or default_title(spec))
    c = _pick(spec)
    L, L_k, d, d_k, H = spec.tokens, spec.L_k, spec.d_model, spec.d_k, spec.heads
    tokens = [f"t{i + 1}" for i in range(L)]
    kv_tokens = [f"s{j + 1}" for j in range(L_k)]
    padding = None
    if spec.mask == "padding":
        padding = [True] * (L_k - 1) + [False]
        if spec.cross is not None:
            kv_tokens[-1] = "PAD"
        else:
            tokens[-1] = "PAD"
    x_values = sorted({v for row in c.x + (c.x_kv or []) for v in row})
    w_values = sorted({v for head in c.heads for m in head.w for row in m for v in row})
    why = t("new.file.why", x_values=", ".join(map(str, x_values)), w_values=", ".join(str(v) for v in w_values if v),
            qkv=_range(*c.qkv), scores=_range(*c.scores), scale=_scale(d_k))
    out = [
        *_comment(t("new.file.written_by", command=command_line(spec))),
        "#",
        *textwrap.wrap(why, 78, initial_indent="# ", subsequent_indent="# "),
        "#",
        *_comment(t("new.file.check")),
        "",
        *_comment(t("new.file.id")),
        f"id: {spec.id or default_id(spec)}",
        *_comment(t("new.file.title")),
        f"title: {_quote(spec.title or default_title(spec))}",
        *_comment(t("new.file.description")),
        "description: |",
        *(f"  {line}" for line in t("new.file.description.text", seed=spec.seed).split("\n")),
        *_comment(t("new.file.tokens")),
        f"tokens: [{', '.join(tokens)}]",
        *_comment(t("new.file.x", L=L, d_model=d)),
        f"x: {_matrix(c.x, 3)}",
    ]
    if c.x_kv is not None:
        out += [
            *_comment(t("new.file.kv_tokens")),
            f"kv_tokens: [{', '.join(kv_tokens)}]",
            *_comment(t("new.file.x_kv", L_k=L_k, d_model=d)),
            f"x_kv: {_matrix(c.x_kv, 6)}",
        ]
    src = "x_kv" if c.x_kv is not None else "x"
    out += [*_comment(t("new.file.heads", src=src, d_model=d, d_k=d_k)), "heads:"]
    for h, (w_q, w_k, w_v) in enumerate(head.w for head in c.heads):
        out += [
            *_comment(t("new.file.head", head=h + 1), indent="  "),
            f"  - w_q: {_matrix(w_q, 9)}",
            f"    w_k: {_matrix(w_k, 9)}",
            f"    w_v: {_matrix(w_v, 9)}",
        ]
    if spec.mask == "causal":
        out += [*_comment(t("new.file.mask")), "mask: causal"]
    if padding is not None:  # PyTorch's polarity: true = a padding key
        out += [*_comment(t("new.file.key_padding_mask")),
                f"key_padding_mask: [{', '.join('false' if real else 'true' for real in padding)}]"]
    tags = ["generated", "single-head" if H == 1 else "multi-head"]
    tags += {"causal": ["mask", "causal"], "padding": ["mask", "padding"]}.get(spec.mask, [])
    tags += ["cross-attention"] if spec.cross is not None else []
    out += [
        *_comment(t("new.file.tags")),
        f"tags: [{', '.join(tags)}]",
        *_comment(t("new.file.difficulty")),
        f"difficulty: {spec.level}",
        "",
    ]
    return "\n".join(out)
