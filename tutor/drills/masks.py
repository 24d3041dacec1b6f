"""``drill masks``: one mask asked, then shown, in every convention PyTorch uses.

A scenario is a small batch (``L_q``, ``L_k`` of 2 to 6) with a causal mask
(top-left, as ``is_causal=True``, or bottom-right, as a decode step with a KV
cache needs), key padding (at the end or at the start of a sequence), or
both.  Its mask is computed here from those rules, then asked in one
convention:

* ``sdpa_bool`` -- ``F.scaled_dot_product_attention``'s boolean ``attn_mask``: True = may attend;
* ``mha_bool`` -- ``nn.MultiheadAttention``'s boolean ``attn_mask``: True = may *not* attend;
* ``additive`` -- a float mask added to the scores: 0 where allowed, ``-inf`` where blocked;
* ``key_padding_mask`` -- ``nn.MultiheadAttention``'s ``[B, L_k]``: True = padding;
* ``causal_alignment`` -- the bottom-right causal mask when ``L_q < L_k``;

then a question on what follows from it: a query row that may attend to no
key (what each API and setting returns), the ``-1e9`` idiom (float16), or
padded query rows.  Every fact those questions state is in :data:`FACTS`,
and the tests check each one against torch 2.13.  After a scenario's last
question the mask is shown in every convention.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Literal

from ..base.cells import pad, pad_left, widest
from ..base.messages import plural, t
from .record import Question, Variant, lettered

Causal = Literal["none", "top_left", "bottom_right"]
Mask = tuple[tuple[bool, ...], ...]


@dataclass(frozen=True)
class Scenario:
    """A batch of ``B`` sequences, ``L_q`` queries over ``L_k`` keys.

    ``causal``: none, ``top_left`` (query ``i`` may attend to key ``j`` when
    ``j <= i``: ``is_causal=True``, ``causal_upper_left``) or ``bottom_right``
    (``j <= i + L_k - L_q``: the queries are the last ``L_q`` positions, as in
    a decode step; ``causal_lower_right``).  ``lengths[b]`` is how many keys of
    sequence ``b`` are real; the others are padding, at the end of the
    sequence or, with ``left``, at its start.  ``batch`` is the sequence asked about.
    """

    kind: str
    B: int
    L_q: int
    L_k: int
    causal: Causal
    lengths: tuple[int, ...]
    left: bool
    batch: int
    window: int | None = None  # issue 23: a sliding window of W keys (Mistral), and S attention sinks
    sinks: int = 0

    @property
    def padded(self) -> bool:
        """True when some sequence has padding keys."""
        return any(n < self.L_k for n in self.lengths)

    def key_padding_mask(self) -> Mask:
        """``[B, L_k]``, True = padding (``nn.MultiheadAttention``'s convention)."""
        return tuple(tuple((j < self.L_k - n) if self.left else (j >= n) for j in range(self.L_k))
                     for n in self.lengths)

    def causal_allowed(self, align: Causal | None = None) -> Mask:
        """``[L_q, L_k]``, True = may attend, for the causal rule alone (all True without one)."""
        align = self.causal if align is None else align
        shift = self.L_k - self.L_q if align == "bottom_right" else 0
        if self.window is not None and align != "none":  # issue 23: the window (and its sinks) as well
            return window_rule(self.L_q, self.L_k, shift, self.window, self.sinks, "right")
        return tuple(tuple(align == "none" or j <= i + shift for j in range(self.L_k)) for i in range(self.L_q))

    def allowed(self, b: int | None = None) -> Mask:
        """``[L_q, L_k]`` of sequence ``b`` (default :attr:`batch`), True = may attend: the causal rule AND not padding."""
        b = self.batch if b is None else b
        pad = self.key_padding_mask()[b]
        return tuple(tuple(ok and not pad[j] for j, ok in enumerate(row)) for row in self.causal_allowed())

    def fully_masked(self, b: int | None = None) -> list[int]:
        """The query rows of sequence ``b`` that may attend to no key."""
        return [i for i, row in enumerate(self.allowed(b)) if not any(row)]


def random_scenario(rng: random.Random) -> Scenario:
    """Causal with right padding, causal with left padding (rows with no key), a decode step with a
    cache (bottom-right), or cross-attention with key padding."""
    kind = rng.choice(("causal_padding", "left_padding", "cache", "cross_padding"))
    if kind == "causal_padding":
        L = rng.choice((3, 4, 5))
        return Scenario(kind, 2, L, L, "top_left", (L, L - rng.choice((1, 2))), False, 1)
    if kind == "left_padding":
        L = rng.choice((4, 5))
        return Scenario(kind, 2, L, L, "top_left", (L, L - rng.choice((1, 2))), True, 1)
    if kind == "cache":  # no padding: every key is real
        L_q = rng.choice((1, 2, 3))
        L_k = L_q + rng.choice((2, 3))
        return Scenario(kind, 1, L_q, L_k, "bottom_right", (L_k,), False, 0)
    L_q, L_k = rng.choice(((2, 4), (3, 5), (2, 5), (3, 6)))
    return Scenario(kind, 2, L_q, L_k, "none", (L_k, L_k - rng.choice((1, 2))), False, 1)


# --- conventions -------------------------------------------------------------------------------

CONVENTIONS = ("sdpa_bool", "mha_bool", "additive")
NEG_INF = float("-inf")


def as_convention(allowed: Mask, convention: str) -> tuple[tuple[float, ...], ...]:
    """``allowed`` (True = may attend) in ``convention``, as numbers: 1/0 for booleans, 0/-inf additive."""
    if convention == "sdpa_bool":
        return tuple(tuple(1.0 if a else 0.0 for a in row) for row in allowed)
    if convention == "mha_bool":
        return tuple(tuple(0.0 if a else 1.0 for a in row) for row in allowed)
    if convention == "additive":
        return tuple(tuple(0.0 if a else NEG_INF for a in row) for row in allowed)
    raise KeyError(convention)


def _cell(v: float, convention: str) -> str:
    if convention == "additive":
        return "-inf" if v == NEG_INF else "0"
    return str(int(v))


def position(i: int) -> int:
    """The position a learner reads for index ``i``: sequences, queries and keys are counted from 1, as
    everywhere else in the tool (``r1``, ``d1``, head 1)."""
    return i + 1


def grid(rows: tuple[tuple[float, ...], ...], convention: str, row_label: str = "q", col_label: str = "k") -> list[str]:
    """A mask as aligned text lines, rows labelled ``q1``, ``q2``, … and columns ``k1``, ``k2``, …"""
    cells = [[_cell(v, convention) for v in row] for row in rows]
    width = widest([c for row in cells for c in row] + [f"{col_label}{position(len(rows[0]) - 1)}"])  # cells, not len
    label = widest(f"{row_label}{position(i)}" for i in range(len(rows)))
    head = " " * label + "  " + " ".join(pad_left(f"{col_label}{position(j)}", width) for j in range(len(rows[0])))
    return [head] + [pad(f"{row_label}{position(i)}", label) + "  " + " ".join(pad_left(c, width) for c in row)
                     for i, row in enumerate(cells)]


def every_convention(s: Scenario) -> list[str]:
    """The scenario's mask for the sequence asked about, in every convention, as lines of text."""
    allowed = s.allowed()
    lines = [t("drill.masks.every", batch=position(s.batch))]
    for convention in CONVENTIONS:
        lines.append(t(f"drill.masks.name.{convention}"))
        lines += ["  " + line for line in grid(as_convention(allowed, convention), convention)]
    if s.padded:
        lines.append(t("drill.masks.name.key_padding_mask"))
        kpm = tuple(tuple(1.0 if p else 0.0 for p in row) for row in s.key_padding_mask())
        lines += ["  " + line for line in grid(kpm, "mha_bool", "b")]
    if s.window is not None:  # issue 23: the window's rule, not is_causal's
        lines.append(t("drill.masks.window.rule.sinks" if s.sinks else "drill.masks.window.rule", W=s.window, S=s.sinks,
                       shift=s.L_k - s.L_q))
    elif s.causal != "none":
        lines.append(t(f"drill.masks.causal.{s.causal}", L_q=s.L_q, L_k=s.L_k))
    rows = s.fully_masked()
    if rows:
        lines.append(t("drill.masks.fully_masked_rows", rows=t("list.sep").join(f"q{position(i)}" for i in rows)))
    return lines


# --- facts (each checked against torch 2.13 by the tests) ------------------------------------------

Result = Literal["zeros", "nan", "bias", "mean_v", "error", "neg_inf"]


@dataclass(frozen=True)
class Fact:
    """What PyTorch does in one setting: ``setting`` and ``explain`` are message keys, ``result`` the outcome."""

    id: str
    topic: str
    result: Result


#: What a query row that may attend to no key gives, and what the -1e9 idiom does, per API and setting.
FACTS = (
    Fact("sdpa_bool", "fully_masked", "zeros"),
    Fact("sdpa_additive", "fully_masked", "zeros"),
    Fact("manual_inf", "fully_masked", "nan"),
    Fact("manual_1e9", "fully_masked", "mean_v"),
    Fact("mha_need_weights", "fully_masked", "nan"),
    Fact("mha_train_no_weights", "fully_masked", "bias"),
    Fact("mha_fast_path", "fully_masked", "nan"),
    Fact("f16_masked_fill", "neg_1e9", "error"),
    Fact("f16_mask_tensor", "neg_1e9", "neg_inf"),
    Fact("f32_fully_masked", "neg_1e9", "mean_v"),
    Fact("finfo_min_sum", "neg_1e9", "neg_inf"),
)

RESULTS = {"fully_masked": ("zeros", "nan", "bias", "mean_v"), "neg_1e9": ("error", "neg_inf", "mean_v", "nan")}


def fact(fid: str) -> Fact:
    """The fact called ``fid``."""
    return next(f for f in FACTS if f.id == fid)


# --- questions ------------------------------------------------------------------------------------


def questions(seed: int, count: int) -> list[Question]:
    """``count`` questions drawn with ``seed``: scenario after scenario, two or three questions each; every
    third scenario a sliding window (:func:`random_window_scenario`)."""
    rng = random.Random(seed)
    out: list[Question] = []
    n = 0
    while len(out) < count:
        n += 1
        s = random_window_scenario(rng) if n % 3 == 0 else random_scenario(rng)
        out += scenario_questions(s, rng, f"masks-{seed}-{n}")
    return out[:count]


def scenario_questions(s: Scenario, rng: random.Random, prefix: str) -> list[Question]:
    """The questions of one scenario; the last one shows the mask in every convention after its verdict."""
    if s.window is not None:
        return window_questions(s, rng, prefix)
    qs: list[Question] = []
    setting = _setting(s)
    config: dict[str, object] = {"B": s.B, "L_q": s.L_q, "L_k": s.L_k, "causal": s.causal, "lengths": list(s.lengths),
              "padding_side": "left" if s.left else "right", "batch": s.batch}
    kpm = [list(row) for row in s.key_padding_mask()]
    if s.causal == "bottom_right":
        qs.append(_matrix_question(s, "sdpa_bool", "causal_alignment", setting, config, f"{prefix}-a"))
    else:
        qs.append(_matrix_question(s, rng.choice(CONVENTIONS), None, setting, config, f"{prefix}-a"))
    if s.padded:
        qs.append(_padding_question(s, setting, config, f"{prefix}-b"))
    if s.fully_masked():
        qs.append(_fact_question(rng.choice([f for f in FACTS if f.topic == "fully_masked"]), s, setting, config,
                                 rng, f"{prefix}-c"))
    elif s.padded and s.kind != "cross_padding" and rng.random() < 0.5:
        qs.append(_query_padding_question(s, setting, config, rng, f"{prefix}-c"))
    else:
        qs.append(_fact_question(rng.choice([f for f in FACTS if f.topic == "neg_1e9"]), s, setting, config, rng,
                                 f"{prefix}-c"))
    last = max(i for i, q in enumerate(qs) if q.kind == "matrix")  # the choice questions do not depend on it
    qs[last] = Question(**{**qs[last].__dict__, "after": tuple(every_convention(s))})
    return [Question(**{**q.__dict__, "json": {**q.json, "key_padding_mask": kpm}}) if s.padded else q for q in qs]


def _setting(s: Scenario) -> str:
    if s.kind == "cache":
        text = plural("drill.masks.setting.cache", s.L_q, L_k=s.L_k, cached=s.L_k - s.L_q)
    else:
        side = t("drill.masks.side.left" if s.left else "drill.masks.side.right")
        lengths = t("list.sep").join(str(n) for n in s.lengths)  # a list in prose: 、 in Chinese
        key = "drill.masks.setting.cross" if s.kind == "cross_padding" else "drill.masks.setting.causal_padding"
        text = t(key, B=s.B, L_q=s.L_q, L_k=s.L_k, lengths=lengths, side=side)
    return text


def _matrix_question(s: Scenario, convention: str, topic: str | None, setting: str, config: dict[str, object],
                     qid: str) -> Question:
    allowed = s.allowed()
    answer = as_convention(allowed, convention)
    variants: list[tuple[tuple[tuple[float, ...], ...], str]] = []
    inverted = tuple(tuple(not a for a in row) for row in allowed)
    variants.append((as_convention(inverted, convention), f"drill.masks.inverted.{convention}"))
    if s.window is not None:  # issue 23
        variants += _window_variants(s, convention)
    elif s.causal == "bottom_right":
        variants.append((as_convention(s.causal_allowed("top_left"), convention), "drill.masks.top_left"))
    if s.padded:
        pad = s.key_padding_mask()[s.batch]
        if s.L_q == s.L_k:  # self-attention: the padding put on the query rows instead of the key columns
            rows = tuple(tuple(ok and not pad[i] for ok in row) for i, row in enumerate(s.causal_allowed()))
            variants.append((as_convention(rows, convention), "drill.masks.query_rows"))
        if s.causal != "none":
            variants.append((as_convention(s.causal_allowed(), convention), "drill.masks.no_padding"))
            only_pad = tuple(tuple(not pad[j] for j in range(s.L_k)) for _ in range(s.L_q))
            variants.append((as_convention(only_pad, convention), "drill.masks.no_causal"))
    if convention == "additive":
        variants.append((tuple(tuple(-1e9 if v == NEG_INF else v for v in row) for row in answer),
                         "drill.masks.finite"))
        variants.append((as_convention(allowed, "sdpa_bool"), "drill.masks.bool_as_additive"))
    seen = {answer}
    unique = []
    for value, key in variants:
        if value not in seen:
            seen.add(value)
            unique.append(Variant(value, key, t(key)))
    topic = topic or convention
    how = t(f"drill.masks.ask.{convention}", L_q=s.L_q, L_k=s.L_k, batch=position(s.batch))
    if s.window is not None:
        how = t(f"drill.masks.ask.window.{convention}", L_q=s.L_q, L_k=s.L_k)
    elif topic == "causal_alignment":
        how = t("drill.masks.ask.bottom_right", L_q=s.L_q, L_k=s.L_k)
    return Question(
        drill="masks", topic=topic, id=qid, kind="matrix", prompt=setting + "\n" + how,
        answer=answer, answer_text="; ".join(" ".join(_cell(v, convention) for v in row) for row in answer),
        config=config, hint=t(f"drill.masks.hint.{convention}"),
        explain=tuple([t(f"drill.masks.name.{convention}")] + ["  " + line for line in grid(answer, convention)]),
        variants=tuple(unique), json={"convention": convention, "additive": convention == "additive"},
    )


def _padding_question(s: Scenario, setting: str, config: dict[str, object], qid: str) -> Question:
    kpm = tuple(tuple(1.0 if p else 0.0 for p in row) for row in s.key_padding_mask())
    inverted = tuple(tuple(1.0 - v for v in row) for row in kpm)
    return Question(
        drill="masks", topic="key_padding_mask", id=qid, kind="matrix",
        prompt=setting + "\n" + t("drill.masks.ask.key_padding_mask", B=s.B, L_k=s.L_k),
        answer=kpm, answer_text="; ".join(" ".join(str(int(v)) for v in row) for row in kpm),
        config=config, hint=t("drill.masks.hint.key_padding_mask"),
        explain=tuple([t("drill.masks.name.key_padding_mask")] + ["  " + line for line in grid(kpm, "mha_bool", "b")]),
        variants=(Variant(inverted, "drill.masks.inverted.key_padding_mask", t("drill.masks.inverted.key_padding_mask")),),
        json={"convention": "key_padding_mask", "additive": False},
    )


def _fact_question(f: Fact, s: Scenario, setting: str, config: dict[str, object], rng: random.Random,
                   qid: str) -> Question:
    results = list(RESULTS[f.topic])
    rng.shuffle(results)
    why = t(f"drill.masks.fact.{f.id}")
    choices = lettered([(r, t(f"drill.masks.result.{r}"), r == f.result, "") for r in results])
    right = next(c for c in choices if c.right)
    masked = s.fully_masked()
    rows = t("list.sep").join(f"q{position(i)}" for i in masked)
    ask = (plural("drill.masks.ask.fully_masked", len(masked), rows=rows, batch=position(s.batch),
                  setting=t(f"drill.masks.setting.{f.id}"))
           if f.topic == "fully_masked" else t("drill.masks.ask.neg_1e9", setting=t(f"drill.masks.setting.{f.id}")))
    prompt = ask if f.topic == "neg_1e9" else setting + "\n" + ask
    return Question(
        drill="masks", topic=f.topic, id=qid, kind="choice", prompt=prompt,
        answer=right.key, answer_text=t("drill.choice.answer", key=right.key, text=right.text), config=config if f.topic == "fully_masked" else {},
        hint=t(f"drill.masks.hint.{f.topic}"), explain=(why,), choices=choices, json={"fact": f.id},
    )


def _query_padding_question(s: Scenario, setting: str, config: dict[str, object], rng: random.Random,
                            qid: str) -> Question:
    options = [("keys_only", t("drill.masks.qpad.keys_only"), True, ""),
               ("block_rows", t("drill.masks.qpad.block_rows"), False, t("drill.masks.qpad.block_rows.why")),
               ("no_mask", t("drill.masks.qpad.no_mask"), False, t("drill.masks.qpad.no_mask.why")),
               ("rows_only", t("drill.masks.qpad.rows_only"), False, t("drill.masks.qpad.rows_only.why"))]
    rng.shuffle(options)
    choices = lettered(options)
    right = next(c for c in choices if c.right)
    return Question(
        drill="masks", topic="query_padding", id=qid, kind="choice",
        prompt=setting + "\n" + t("drill.masks.ask.query_padding"),
        answer=right.key, answer_text=t("drill.choice.answer", key=right.key, text=right.text), config=config,
        hint=t("drill.masks.hint.query_padding"), explain=(t("drill.masks.qpad.explain"),), choices=choices,
        json={"fact": "query_padding"},
    )


# --- issue 23: sliding windows (Mistral), attention sinks (StreamingLLM), the rolling buffer cache ---------

WindowRule = Literal["right", "window_wide", "window_narrow", "window_acausal", "sinks_forgotten"]


def window_rule(L_q: int, L_k: int, shift: int, window: int, sinks: int, rule: WindowRule) -> Mask:
    """``[L_q, L_k]`` True = may attend, query ``i`` at position ``p = i + shift``: ``"right"`` is ``j <= p`` and
    (``p - W < j`` or ``j < S``); the mistakes keep ``p - W <= j`` (``window_wide``), ``p - W + 1 < j``
    (``window_narrow``), the keys after the query too, ``|p - j| < W`` (``window_acausal``), or no sink
    (``sinks_forgotten``)."""
    def ok(p: int, j: int) -> bool:
        if rule == "window_acausal":
            return p - window < j < p + window or j < sinks
        low = {"window_wide": p - window - 1, "window_narrow": p - window + 1}.get(rule, p - window)
        return j <= p and (low < j or (j < sinks and rule != "sinks_forgotten"))
    return tuple(tuple(ok(i + shift, j) for j in range(L_k)) for i in range(L_q))


def random_window_scenario(rng: random.Random) -> Scenario:
    """A sliding window over a sequence, a window with attention sinks, or a decode step with a window over a
    KV cache (bottom-right: the new queries are the last positions)."""
    kind = rng.choice(("window", "window_sinks", "window_cache"))
    W = rng.choice((2, 3))
    if kind == "window_cache":
        L_q = rng.choice((1, 2))
        L_k = L_q + W + rng.choice((1, 2))
        return Scenario(kind, 1, L_q, L_k, "bottom_right", (L_k,), False, 0, W)
    L = rng.choice((4, 5, 6))
    S = 0
    if kind == "window_sinks":  # W + S >= L covers every key: the mask would be the causal one (rope trial F8)
        L = max(L, W + 2)
        S = rng.choice([s for s in (1, 2) if W + s < L])
    return Scenario(kind, 1, L, L, "top_left", (L,), False, 0, W, S)


def window_questions(s: Scenario, rng: random.Random, prefix: str) -> list[Question]:
    """A window scenario's questions: how many keys the last query sees, its mask in one convention (the
    mistakes named: the window one key too wide or too narrow, without causality, the sinks forgotten, a decode
    step aligned top-left), and with a cache which position the rolling buffer overwrites."""
    assert s.window is not None
    setting = _window_setting(s)
    config: dict[str, object] = {"B": s.B, "L_q": s.L_q, "L_k": s.L_k, "causal": s.causal, "lengths": list(s.lengths),
                                 "sliding_window": s.window, "sinks": s.sinks}
    convention = "sdpa_bool" if s.kind == "window_cache" else rng.choice(CONVENTIONS)
    # the count first: the matrix question's verdict shows the mask in every convention
    matrix = _matrix_question(s, convention, "sliding_window", setting, config, f"{prefix}-b")
    qs = [_seen_question(s, setting, config, f"{prefix}-a"), Question(**{**matrix.__dict__, "after": tuple(every_convention(s))})]
    if s.kind == "window_cache":
        qs.append(_buffer_question(s, rng, f"{prefix}-c"))
    return qs


def _window_setting(s: Scenario) -> str:
    if s.kind == "window_cache":
        return t("drill.masks.setting.window_cache", L_q=s.L_q, L_k=s.L_k, cached=s.L_k - s.L_q, W=s.window)
    if s.sinks:
        return t("drill.masks.setting.window_sinks", L=s.L_q, W=s.window, S=s.sinks)
    return t("drill.masks.setting.window", L=s.L_q, W=s.window)


def _window_variants(s: Scenario, convention: str) -> list[tuple[tuple[tuple[float, ...], ...], str]]:
    """The window's mistakes as masks in ``convention``, each with the key that names it."""
    assert s.window is not None
    shift = s.L_k - s.L_q
    rules: list[WindowRule] = ["window_wide", "window_narrow", "window_acausal"]
    if s.sinks:
        rules.append("sinks_forgotten")
    out = [(as_convention(window_rule(s.L_q, s.L_k, shift, s.window, s.sinks, r), convention), f"drill.masks.{r}")
           for r in rules]
    if shift:  # a decode step's window aligned top-left
        out.append((as_convention(window_rule(s.L_q, s.L_k, 0, s.window, s.sinks, "right"), convention),
                    "drill.masks.window_top_left"))
    return out


def _seen_question(s: Scenario, setting: str, config: dict[str, object], qid: str) -> Question:
    """How many keys the last query attends to, with the counts the window's mistakes give."""
    assert s.window is not None
    shift = s.L_k - s.L_q
    last = s.L_q - 1

    def seen(rule: WindowRule) -> int:
        assert s.window is not None
        return sum(window_rule(s.L_q, s.L_k, shift, s.window, s.sinks, rule)[last])

    answer = seen("right")
    variants: list[Variant] = []
    rule: WindowRule
    for rule in ("window_wide", "window_narrow", "sinks_forgotten"):
        n = seen(rule)
        mistake = Variant(n, f"drill.masks.{rule}", t(f"drill.masks.{rule}"), slips=())
        same = next((i for i, v in enumerate(variants) if v.value == n), None)
        if n == answer:
            continue
        if same is None:
            variants.append(mistake)
        else:  # two mistakes give this count: either may be what happened
            variants[same] = replace(variants[same], also=(*variants[same].also, mistake))
    keys = [f"k{position(j)}" for j, ok in enumerate(s.allowed()[last]) if ok]
    return Question(
        drill="masks", topic="window_keys", id=qid, kind="count",
        prompt=setting + "\n" + t("drill.masks.ask.window_keys", row=f"q{position(last)}"),
        answer=answer, answer_text=str(answer), config=config, hint=t("drill.masks.hint.window_keys"),
        explain=(t("drill.masks.window_keys.explain", row=f"q{position(last)}", keys=", ".join(keys), count=answer),),
        variants=tuple(variants), json={"unit": "keys"},
    )


def _buffer_question(s: Scenario, rng: random.Random, qid: str) -> Question:
    """A rolling buffer cache of W slots (position p in slot p mod W, from 0): which position writing position
    P overwrites -- P − W, the first that left the window."""
    assert s.window is not None
    W = s.window
    P = W + rng.choice((1, 2, 3, 4))
    options = [("p_minus_w", str(P - W), True, ""),
               ("p_minus_w_plus_1", str(P - W + 1), False, t("drill.masks.buffer.wrong.plus_1", W=W)),
               ("p_minus_1", str(P - 1), False, t("drill.masks.buffer.wrong.previous")),
               ("grows", t("drill.masks.buffer.grows"), False, t("drill.masks.buffer.wrong.grows", W=W))]
    rng.shuffle(options)
    choices = lettered(options)
    right = next(c for c in choices if c.right)
    return Question(
        drill="masks", topic="rolling_buffer", id=qid, kind="choice",
        prompt=t("drill.masks.ask.rolling_buffer", W=W, P=P),
        answer=right.key, answer_text=t("drill.choice.answer", key=right.key, text=right.text),
        config={"sliding_window": W, "position": P},
        hint=t("drill.masks.hint.rolling_buffer"),
        explain=(t("drill.masks.buffer.explain", W=W, P=P, slot=P % W, old=P - W),), choices=choices,
        json={"fact": "rolling_buffer"},
    )
