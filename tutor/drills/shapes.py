"""``drill shapes``: the shape at a named point of the production forward, and the operation between two points.

Every answer comes from :func:`tutor.numeric.trace.production_trace` (the
NumPy core's shape trace; the tests check it against torch 2.13).  A
configuration is random but sensible: sizes an interviewer would use, mostly
different from one another so that a wrong answer can be told axis by axis;
self- or cross-attention; multi-head, grouped-query or multi-query; fused or
separate projections; no mask, causal, key padding or both.

Two kinds of question:

* ``shape`` -- "the shape of ``scores``?"; the answer is a list of ints, a
  wrong one is explained axis by axis (:func:`tutor.drills.record.explain_shape`);
* ``choice`` -- "which expression turns ``q_proj`` into ``q_heads``?"; the
  wrong options are real mistakes (a view without the transpose, ``repeat``
  for ``repeat_interleave``, softmax over the wrong axis), each with the
  sentence that says what it does (the tests run every option in torch and
  check what the sentence claims: an error, another shape, other values).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..base.messages import t
from .record import Question, lettered

if TYPE_CHECKING:  # the trace module imports numpy: loaded only when questions are made
    from ..numeric.trace import AttentionConfig, TracePoint

#: The points a question may name (the issue's list; ``qkv`` and ``x_kv`` are in the trace but not asked).
ASKED = ("x", "q_proj", "k_proj", "v_proj", "q_heads", "k_heads", "v_heads", "k_repeated", "v_repeated",
         "key_padding_mask", "attn_mask", "scores", "weights", "head_outputs", "merged", "output")

#: What each sizes axis of a configuration is called in JSON (the field's names).
CONFIG_FIELDS = ("B", "L_q", "L_k", "d_model", "num_heads", "num_kv_heads", "d_k", "d_v")

#: What a wrong option does: raise an error, give another shape, give the right shape with other values,
#: one of the last two ("wrong"), or raise exactly when L_q != L_k and otherwise give something else.
Claim = Literal["raises", "shape", "values", "wrong", "raises_if_lengths_differ"]


@dataclass(frozen=True)
class Mistake:
    """A wrong option of an operation question: its PyTorch text, what it does (``claim``: raises an
    error, gives another shape, gives the right shape with other values, or either of the last two),
    and the key of the sentence that says so."""

    id: str
    code: str
    claim: Claim
    why: str


def _mistakes(target: str, keys: str) -> tuple[Mistake, ...]:
    """The wrong options for the operation that makes ``target`` (``keys``: ``k_heads`` or ``k_repeated``)."""
    if target == "q_heads":
        return (Mistake("no_transpose_view", "q_heads = q_proj.reshape(B, num_heads, L_q, d_k)", "values",
                        "drill.op.q_heads.no_transpose_view"),
                Mistake("interleaved", "q_heads = q_proj.view(B, L_q, d_k, num_heads).permute(0, 3, 1, 2)", "values",
                        "drill.op.q_heads.interleaved"),
                Mistake("no_transpose", "q_heads = q_proj.view(B, L_q, num_heads, d_k)", "wrong",
                        "drill.op.q_heads.no_transpose"))
    if target in ("k_repeated", "v_repeated"):
        src, d = ("k_heads", "d_k") if target == "k_repeated" else ("v_heads", "d_v")
        return (Mistake("tile", f"{target} = {src}.repeat(1, num_heads // num_kv_heads, 1, 1)", "values",
                        "drill.op.repeated.tile"),
                Mistake("keys_axis", f"{target} = {src}.repeat_interleave(num_heads // num_kv_heads, dim=2)", "shape",
                        "drill.op.repeated.keys_axis"),
                Mistake("expand", f"{target} = {src}.expand(B, num_heads, L_k, {d})", "raises",
                        "drill.op.repeated.expand"))
    if target == "merged":
        return (Mistake("no_transpose", "merged = head_outputs.reshape(B, L_q, num_heads·d_v)", "values",
                        "drill.op.merged.no_transpose"),
                Mistake("view", "merged = head_outputs.transpose(1, 2).view(B, L_q, num_heads·d_v)", "raises",
                        "drill.op.merged.view"),
                Mistake("sum_heads", "merged = head_outputs.sum(dim=1)", "shape", "drill.op.merged.sum_heads"))
    if target == "scores":
        return (Mistake("k_q", f"scores = {keys} @ q_heads.transpose(-2, -1) / math.sqrt(d_k)", "wrong",
                        "drill.op.scores.k_q"),
                Mistake("scale_d_k", f"scores = q_heads @ {keys}.transpose(-2, -1) / d_k", "values",
                        "drill.op.scores.scale_d_k"),
                Mistake("features", f"scores = q_heads.transpose(-2, -1) @ {keys} / math.sqrt(d_k)",
                        "raises_if_lengths_differ",
                        "drill.op.scores.features"))
    if target == "weights":
        return (Mistake("queries", "weights = scores.softmax(dim=-2)", "values", "drill.op.weights.queries"),
                Mistake("heads", "weights = scores.softmax(dim=1)", "values", "drill.op.weights.heads"),
                Mistake("sigmoid", "weights = scores.sigmoid()", "values", "drill.op.weights.sigmoid"))
    raise KeyError(target)


def op_targets(cfg: AttentionConfig) -> list[str]:
    """The points whose operation can be asked for ``cfg``: those whose every wrong option is wrong for it
    (a view without the transpose is only wrong with more than one head and more than one token, …)."""
    H, Hkv = cfg.num_heads, cfg.num_kv_heads
    found = []
    if H > 1 and cfg.L_q > 1 and cfg.d_k > 1:
        found += ["q_heads", "merged"]
    if 1 < Hkv < H:
        found += ["k_repeated", "v_repeated"]
    if cfg.d_k > 1:
        found.append("scores")
    if H > 1 and cfg.L_q > 1 and cfg.L_k > 1:
        found.append("weights")
    return found


# --- configurations -------------------------------------------------------------------------


def random_config(rng: random.Random) -> AttentionConfig:
    """A random but sensible configuration: the sizes an interviewer would use.

    The structure is drawn first -- self- or cross-attention, multi-head,
    grouped-query or multi-query, fused or separate projections (fused only
    in self-attention), the masks (causal only in self-attention) -- then the
    sizes: ``d_model = num_heads·d_k`` most of the time.  The sizes are drawn
    again (up to 50 times) until the batch, the lengths, the head counts, the
    head widths and ``d_model`` differ, so that a size names its axis.
    """
    from ..numeric.trace import AttentionConfig

    cross = rng.random() < 0.35
    grouping = rng.choices(("mha", "gqa", "mqa"), weights=(4, 4, 2))[0]
    fused = not cross and rng.random() < 0.4
    mask = rng.choice(("none", "padding") if cross else ("none", "causal", "causal", "padding", "causal+padding"))
    wide_v = rng.random() < 0.15
    other_width = rng.random() < 0.15
    best: AttentionConfig | None = None
    for _ in range(50):
        d_k = rng.choice((4, 8, 16, 32, 64))
        if grouping == "mha":
            H = H_kv = rng.choice((2, 3, 4, 6, 8, 12, 16))
        elif grouping == "mqa":
            H, H_kv = rng.choice((2, 4, 8, 12, 16)), 1
        else:
            H = rng.choice((4, 6, 8, 12, 16))
            H_kv = rng.choice([g for g in range(2, H) if H % g == 0])
        d_model = rng.choice((64, 128, 256, 512)) if other_width else H * d_k
        d_v = rng.choice((d_k // 2 or 1, 2 * d_k)) if wide_v else d_k
        B = rng.choice((2, 3, 4, 8, 16, 32))
        L_q = rng.choice((3, 5, 6, 7, 9, 10, 12, 20, 128, 512))
        L_k = rng.choice((5, 7, 9, 11, 13, 24, 50, 77, 256, 1024)) if cross else L_q
        d_kv = (d_model if rng.random() < 0.7 else rng.choice((48, 96, 384, 768))) if cross else d_model
        cfg = AttentionConfig(B, L_q, L_k, d_model, H, H_kv, d_k, d_v, d_kv, cross=cross, fused=fused,
                              causal="causal" in mask, padding="padding" in mask)
        best = cfg
        axes = [B, L_q, H, d_k, d_model] + ([L_k] if cross else []) + ([H_kv] if H_kv not in (1, H) else [])
        axes += [d_v] if d_v != d_k else []
        axes += [d_kv] if d_kv != d_model else []
        if len(set(axes)) == len(axes):
            return cfg
    assert best is not None
    return best


def config_fields(cfg: AttentionConfig) -> dict[str, object]:
    """The configuration as ``--format json`` carries it: the sizes under the field's names, then
    ``d_kv``, ``attention`` (``self``/``cross``), ``fused``, ``mask`` (``none``, ``causal``, ``padding``,
    ``causal+padding``)."""
    sizes = cfg.sizes()
    mask = "+".join(m for m, on in (("causal", cfg.causal), ("padding", cfg.padding)) if on) or "none"
    return {**{name: sizes[name] for name in CONFIG_FIELDS}, "d_kv": cfg.d_kv,
            "attention": "cross" if cfg.cross else "self", "fused": cfg.fused, "mask": mask}


def describe(cfg: AttentionConfig) -> str:
    """The configuration as a sentence the learner reads above the question."""
    if cfg.num_kv_heads == cfg.num_heads:
        grouping = t("drill.shapes.mha")
    elif cfg.num_kv_heads == 1:
        grouping = t("drill.shapes.mqa")
    else:
        grouping = t("drill.shapes.gqa", groups=cfg.groups)
    name = "+".join(m for m, on in (("causal", cfg.causal), ("padding", cfg.padding)) if on) or "none"
    mask = t(f"drill.shapes.mask.{name}")
    return t("drill.shapes.config",
             attention=t("drill.shapes.cross" if cfg.cross else "drill.shapes.self"),
             B=cfg.B,
             lengths=(t("drill.shapes.lengths.cross", L_q=cfg.L_q, L_k=cfg.L_k) if cfg.cross
                      else t("drill.shapes.lengths.self", L=cfg.L_q)),
             d_model=cfg.d_model,
             d_kv=t("drill.shapes.d_kv", d_kv=cfg.d_kv) if cfg.cross and cfg.d_kv != cfg.d_model else "",
             num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads, grouping=grouping,
             heads=(t("drill.shapes.widths.same", d=cfg.d_k) if cfg.d_k == cfg.d_v
                    else t("drill.shapes.widths", d_k=cfg.d_k, d_v=cfg.d_v)),
             projection=t("drill.shapes.fused" if cfg.fused else "drill.shapes.separate"),
             mask=mask)


# --- questions --------------------------------------------------------------------------------


def questions(seed: int, count: int) -> list[Question]:
    """``count`` questions drawn with ``seed`` (the same seed, the same questions): one configuration
    each; about one in four asks for an operation, the others for a shape."""
    rng = random.Random(seed)
    out = []
    for n in range(1, count + 1):
        cfg = random_config(rng)
        targets = op_targets(cfg)
        if targets and rng.random() < 0.25:
            out.append(op_question(cfg, rng.choice(targets), rng, f"shapes-{seed}-{n}"))
        else:
            out.append(shape_question(cfg, rng, f"shapes-{seed}-{n}"))
    return out


def shape_question(cfg: AttentionConfig, rng: random.Random, qid: str, point: str | None = None) -> Question:
    """The shape at ``point`` (default: one drawn with ``rng`` among those ``cfg``'s forward has)."""
    from ..numeric.trace import production_trace

    trace = {p.name: p for p in production_trace(cfg)}
    if point is None:
        point = rng.choice([name for name in ASKED if name in trace])
    p = trace[point]
    sizes = {k: v for k, v in cfg.sizes().items() if k != "d_kv" or cfg.cross}
    symbolic = p.symbolic
    return Question(
        drill="shapes", topic=point, id=qid, kind="shape",
        prompt=describe(cfg) + "\n" + t("drill.shapes.ask", point=point, meaning=_meaning(point, p.op)),
        answer=list(p.shape), answer_text=f"{symbolic} = {p.concrete}",
        config=config_fields(cfg),
        hint=(t("drill.shapes.hint.input", rank=len(p.shape)) if p.op == p.name
              else t("drill.shapes.hint", rank=len(p.shape), op=p.op)),
        explain=(_explain(p),),
        dims=p.dims, sizes=sizes,
        others=tuple((q.name, q.shape) for q in trace.values() if q.name != point),
        json={"point": point}, json_answer={"symbolic": list(p.dims)},
    )


def _explain(p: TracePoint) -> str:
    if p.op == p.name:  # an input
        return t("drill.shapes.explain.input", point=p.name, symbolic=p.symbolic, concrete=p.concrete)
    return t("drill.shapes.explain", op=p.op, symbolic=p.symbolic, concrete=p.concrete)


def _meaning(point: str, op: str) -> str:
    if point == "attn_mask":
        return t("drill.point.attn_mask", op=op)
    return t(f"drill.point.{point}")


def op_question(cfg: AttentionConfig, target: str, rng: random.Random, qid: str) -> Question:
    """Which expression makes ``target`` (one of :func:`op_targets`): the trace's own, and three mistakes."""
    from ..numeric.trace import production_trace

    trace = {p.name: p for p in production_trace(cfg)}
    p = trace[target]
    keys = "k_repeated" if "k_repeated" in trace else "k_heads"
    source = next(name for name in p.inputs if name != "attn_mask")
    options = [("right", p.op, True, "")] + [(m.id, m.code, False, t(m.why)) for m in _mistakes(target, keys)]
    rng.shuffle(options)
    choices = lettered(options)
    right = next(c for c in choices if c.right)
    return Question(
        drill="shapes", topic=target, id=qid, kind="choice",
        prompt=describe(cfg) + "\n" + t("drill.shapes.ask_op", source=source, source_shape=trace[source].concrete,
                                        target=target, target_shape=p.concrete),
        answer=right.key, answer_text=t("drill.choice.answer", key=right.key, text=right.text),
        config=config_fields(cfg),
        hint=t("drill.shapes.hint_op", symbolic=p.symbolic),
        explain=(_explain(p),),
        choices=choices,
        json={"point": target, "from": source}, json_answer={"symbolic": list(p.dims), "operation": p.op},
    )


def shapes_of(qs: Sequence[Question]) -> list[tuple[dict[str, object], str, list[int]]]:
    """``(configuration, point, answer)`` of every shape question (what the torch parity test checks)."""
    return [(dict(q.config), str(q.json["point"]), list(q.answer)) for q in qs if q.kind == "shape"]
