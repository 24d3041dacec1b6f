"""An exercise's layer as production code runs it, as shapes: the production view ``explain`` shows.

:func:`exercise_trace` is the batched layer's forward as shapes
(:meth:`tutor.numeric.MultiHeadAttention.shape_trace`), or a decoder's step
for format v2 (:func:`decoder_trace`); :func:`production_view` adds the
notes that hold for this exercise (a query row with no key to attend, a
causal mask whose alignment matters).  Pure: no arrays are made.
"""

from __future__ import annotations

from dataclasses import replace

from ..base.messages import Msg, Text
from ..exercise.record import Exercise
from ..numeric.trace import TraceStep, _TraceBuilder, merge_copies
from .run import layer_of


def exercise_trace(ex: Exercise, B: int = 1) -> tuple[TraceStep, ...]:
    """The production shape trace of an exercise's layer (see :meth:`tutor.numeric.MultiHeadAttention.shape_trace`).

    Raises :class:`~tutor.base.errors.ShapeError` as :func:`tutor.production.run.layer_of`.  An exercise of
    format v2 (grouped K/V heads, a cache, a bias) is traced as a decoder runs it (:func:`decoder_trace`).
    """
    if ex.mla is not None:
        return latent_trace(ex, B)
    if ex.is_v2 or ex.rope is not None:  # RoPE (format v3): a decoder's layer, nn.MultiheadAttention has none
        return decoder_trace(ex, B)
    layer = layer_of(ex)
    mask = ex.mask is not None or ex.mask_kind == "causal"
    padding = ex.key_padding is not None
    steps = layer.shape_trace(
        B, ex.L, ex.L_k if ex.is_cross else None, cross=ex.is_cross, masked=mask or padding,
        allowed="both" if mask and padding else "padding" if padding else "mask",
    )
    return _with_block(ex, steps, B) if ex.has_norm or ex.residual else steps


def _reads_x_norm(step: TraceStep) -> TraceStep:
    """A projection's step as it is after a norm: it reads ``x_norm``, not ``x``."""
    if step.key == "trace.qkv":
        return replace(step, key="trace.block.qkv")
    if step.key == "trace.q":
        return replace(step, key="trace.block.q")
    if step.key in ("trace.k", "trace.v"):
        return replace(step, fields=(("src", "x_norm"),))
    return step


def _with_block(ex: Exercise, steps: tuple[TraceStep, ...], B: int) -> tuple[TraceStep, ...]:
    """The pre-norm block around the layer (issue 23): ``x_norm = norm(x)`` ``[B, L, D]`` after the input
    (``torch.nn.RMSNorm``/``LayerNorm(D, elementwise_affine=False)``, over the last axis), which the
    projection then reads, and ``x + out`` ``[B, L, D]`` at the end."""
    shape = (B, ex.L, ex.d_model)
    out = list(steps[:1])
    if ex.has_norm:
        out.append(TraceStep("x_norm", ("B", "L", "D"), shape, f"trace.block.{ex.norm}", (("eps", str(ex.norm_eps)),)))
    out += [_reads_x_norm(s) if ex.has_norm else s for s in steps[1:]]
    if ex.residual:
        out.append(TraceStep("residual", ("B", "L", "D"), shape,
                             "trace.block.residual.post" if ex.post_norm else "trace.block.residual"))
    if ex.post_norm:  # post-norm (issue 23): the sum normalized, the block's output
        out.append(TraceStep("out_norm", ("B", "L", "D"), shape, f"trace.block.post.{ex.norm}",
                             (("eps", str(ex.norm_eps)),)))
    return tuple(out)


def decoder_trace(ex: Exercise, B: int = 1) -> tuple[TraceStep, ...]:
    """The decoder's forward of a v2 exercise as shapes (:class:`tutor.numeric.trace.TraceStep`), ``B`` sequences.

    ``x [B, L, D]`` → ``q_proj [B, L, H·d_k]``, ``k_proj [B, L, G·d_k]``, ``v_proj [B, L, G·d_v]`` → heads
    ``[B, H|G, L, d]`` (``view`` + ``transpose(1, 2)``) → with a cache ``torch.cat`` with the cached
    ``[B, G, L_past, d]`` → SDPA with ``enable_gqa=True`` (the K/V heads repeated to ``[B, H, L_k, d]``
    inside) → ``scores``, the bias and the mask, ``weights`` ``[B, H, L, L_k]`` → ``context`` → merged →
    ``out_proj``.  The concrete shapes are those :func:`run_decoder` makes (a test checks them).
    """
    hd = ex.heads[0]
    sizes = {"B": B, "L": ex.L, "L_past": ex.L_past, "L_k": ex.L_k, "D": ex.d_model, "H": ex.num_heads,
             "G": ex.num_kv_heads, "d_k": hd.d_k, "d_v": hd.d_v, "d_out": ex.d_out}
    tb = _TraceBuilder(sizes)
    G = "G" if ex.grouped else "H"
    tb.add("x", ("B", "L", "D"), "trace.decoder.x" if ex.has_cache else "trace.decoder.x_all")
    tb.add("q_proj", ("B", "L", "H·d_k"), "trace.decoder.q_proj")
    tb.add("k_proj", ("B", "L", f"{G}·d_k"), "trace.decoder.k_proj", G=G)
    tb.add("v_proj", ("B", "L", f"{G}·d_v"), "trace.decoder.v_proj", G=G)
    tb.add("q_heads", ("B", "H", "L", "d_k"), "trace.decoder.heads")
    tb.add("k_heads", ("B", G, "L", "d_k"), "trace.decoder.heads")
    tb.add("v_heads", ("B", G, "L", "d_v"), "trace.decoder.heads")
    if ex.rope is not None:  # RoPE (format v3): q and the new k turned by position, before the cache and the scores
        tb.add("q_rot", ("B", "H", "L", "d_k"), "trace.decoder.rope", what="q")
        tb.add("k_rot", ("B", G, "L", "d_k"), "trace.decoder.rope", what="k")
    if ex.has_cache:
        tb.add("k_cache", ("B", G, "L_past", "d_k"), "trace.decoder.cache")
        tb.add("k", ("B", G, "L_k", "d_k"), "trace.decoder.cat", what="k")
        tb.add("v", ("B", G, "L_k", "d_v"), "trace.decoder.cat", what="v")
    if ex.grouped:
        tb.add("k_repeated", ("B", "H", "L_k", "d_k"), "trace.decoder.repeat", ratio=ex.num_heads // ex.num_kv_heads)
    tb.add("scores", ("B", "H", "L", "L_k"), "trace.decoder.scores.cache" if ex.has_cache else "trace.decoder.scores")
    if ex.has_bias or ex.has_mask:
        tb.add("attn_mask", ("L", "L_k"), "trace.decoder.attn_mask.float" if ex.has_bias else "trace.decoder.attn_mask")
    tb.add("weights", ("B", "H", "L", "L_k"), "trace.decoder.weights")
    tb.add("context", ("B", "H", "L", "d_v"), "trace.decoder.context" if ex.grouped else "trace.decoder.context.plain")
    # transpose(1, 2).reshape(B, L, H·d_v): a view or a copy as for the v1 layer (merge_copies, checked against torch)
    tb.add("merge", ("B", "L", "H·d_v"), "trace.merge.copy" if merge_copies(ex.num_heads, ex.L, hd.d_v) else "trace.merge.view")
    if ex.w_o is not None:
        tb.add("out_proj", ("B", "L", "d_out"), "trace.decoder.out_proj")
    return tuple(tb.steps)


def latent_trace(ex: Exercise, B: int = 1) -> tuple[TraceStep, ...]:
    """The forward of an exercise with multi-head latent attention (format v3, ``mla``) as shapes, ``B`` sequences.

    DeepSeek-V2, §2.1.2: ``x [B, L, D]`` → ``q_proj [B, L, H·d_k]``; the latent ``c_kv [B, L_k, d_c]`` (what
    the cache keeps) → ``k_proj``, ``v_proj`` up-projected from it → heads ``[B, H, L, d]`` → the absorbed
    query ``[B, H, L, d_c]`` beside them → ``scores``, the mask, ``weights`` ``[B, H, L, L_k]`` → ``context``
    → merged → ``out_proj``.  The concrete shapes are those :func:`tutor.production.run.run_latent` makes.
    """
    hd = ex.heads[0]
    assert ex.mla is not None
    sizes = {"B": B, "L": ex.L, "L_k": ex.L_k, "D": ex.d_model, "H": ex.num_heads, "d_k": hd.d_k, "d_v": hd.d_v,
             "d_c": ex.mla.d_c, "d_out": ex.d_out}
    tb = _TraceBuilder(sizes)
    tb.add("x", ("B", "L", "D"), "trace.decoder.x_all")
    tb.add("q_proj", ("B", "L", "H·d_k"), "trace.decoder.q_proj")
    tb.add("c_kv", ("B", "L_k", "d_c"), "trace.latent.c_kv")
    tb.add("k_proj", ("B", "L_k", "H·d_k"), "trace.latent.k_proj")
    tb.add("v_proj", ("B", "L_k", "H·d_v"), "trace.latent.v_proj")
    tb.add("q_heads", ("B", "H", "L", "d_k"), "trace.decoder.heads")
    tb.add("k_heads", ("B", "H", "L_k", "d_k"), "trace.decoder.heads")
    tb.add("v_heads", ("B", "H", "L_k", "d_v"), "trace.decoder.heads")
    tb.add("q_absorbed", ("B", "H", "L", "d_c"), "trace.latent.q_absorbed")
    tb.add("scores", ("B", "H", "L", "L_k"), "trace.latent.scores")
    if ex.has_bias or ex.has_mask:
        tb.add("attn_mask", ("L", "L_k"), "trace.decoder.attn_mask.float" if ex.has_bias else "trace.decoder.attn_mask")
    tb.add("weights", ("B", "H", "L", "L_k"), "trace.decoder.weights")
    tb.add("context", ("B", "H", "L", "d_v"), "trace.decoder.context.plain")
    tb.add("merge", ("B", "L", "H·d_v"), "trace.merge.copy" if merge_copies(ex.num_heads, ex.L, hd.d_v) else "trace.merge.view")
    if ex.w_o is not None:
        tb.add("out_proj", ("B", "L", "d_out"), "trace.decoder.out_proj")
    return tuple(tb.steps)


def empty_rows(ex: Exercise) -> tuple[str, ...]:
    """The labels of the query rows that may attend to no key at all."""
    allowed = ex.allowed()
    return () if allowed is None else tuple(ex.query_labels[i] for i, row in enumerate(allowed) if not any(row))


def notes(ex: Exercise) -> tuple[Text, ...]:
    """Sentences about the exercise's configuration as production code would run it.

    A causal mask with ``L ≠ L_k`` (top-left alignment is not a KV-cache
    decode's bottom-right); a causal mask on cross-attention (not a real
    configuration).
    """
    out: list[Text] = []
    if ex.mask_kind == "causal" and ex.is_cross:
        out.append(Msg("explain.causal.cross"))
    if ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(Msg("explain.causal.offset", L=ex.L, L_k=ex.L_k, shift=ex.L_k - ex.L))
    return tuple(out)


def production_view(ex: Exercise, B: int = 1) -> tuple[tuple[TraceStep, ...], tuple[Text, ...]]:
    """``(steps, notes)``: the exercise's layer as batched tensors (:func:`exercise_trace`)
    with notes that hold for this exercise (a query row with no key to attend sums to 0, not 1),
    and the notes on its configuration (:func:`notes`).  Raises :class:`~tutor.base.errors.ShapeError`
    as :func:`exercise_trace`."""
    steps = exercise_trace(ex, B)
    rows = empty_rows(ex)
    if rows:
        steps = tuple(replace(s, key="trace.weights.empty", count=len(rows),
                              fields=(("rows", Msg.and_list(list(rows))),)) if s.name == "weights" else s
                      for s in steps)
    return steps, notes(ex)
