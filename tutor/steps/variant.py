"""The knobs a misconception turns: one :class:`Variant` of the walks over an exercise's steps.

Each step kind's float function (and its exact-walk twin) reads the knobs
it depends on (the kind names them in :attr:`~tutor.steps.StepKind.varies`);
the defaults compute the right answer.  The misconception catalogue
(:mod:`tutor.mistakes`) is a list of variants; the walks
(:func:`tutor.steps.replay`, :class:`tutor.steps.ExactWalk`) take one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    """The knobs a misconception turns; the defaults compute the right answer.

    ``scale``: what the scores are divided by ("sqrt_dk", "none", "sqrt_dmodel",
    "dk") or multiplied by ("times_dk", "times_sqrt_dk"); "after_softmax": the
    scores left unscaled and the weights divided by ``√d_k`` instead.  ``kq``: ``K·Qᵀ``
    instead of ``Q·Kᵀ``.  ``mask``: "right", "none" (forgotten), "inverted",
    "zero" (blocked scores set to 0), "after_softmax" (weights zeroed after
    the softmax, not renormalised), "padding_rows" (key padding applied to
    query rows).  ``softmax``: False = no softmax at all, the (masked) scaled
    scores are the weights, a blocked score counting 0 (``-inf`` times a
    value has no value; a learner who skips the softmax drops the blocked
    keys).  ``softmax_axis``: -1 rows (right) or 0 columns.  ``normalise``:
    False = exp without dividing by the row sum.  ``empty_rows``: the
    weights of a row whose every score is blocked, "zero" (right) or
    "uniform" (1/L_k each: what a softmax gives when the blocked scores are
    filled with a large negative number instead of -inf).
    ``round_scaled``/``round_weights``: decimals kept when the step is used
    by the next one (None = full precision).  ``values``: "v" or "k"
    (weights·K).  ``heads_reversed``: concatenated last head first.
    ``w_o_transposed``: the output projection uses W_Oᵀ (nn.Linear's ``x @
    weight.T`` with the weight read as [d_out, d_in]; square W_O only).
    ``drop``: biases left out (``b_q``, ``b_k``, ``b_v``, ``b_o``).

    Format v2: ``kv_order``: "repeat" (right: query head h reads K/V head
    ``h // (H/G)``, repeat_interleave) or "tile" (K/V head ``h % G``, the
    ``[A, B, A, B]`` of ``repeat``/``tile``).  ``cache``: "right", or
    "reprojected" (the cached rows multiplied by W_K, W_V again, as if the
    cache held inputs; chains only when W is square).  ``bias``: "right",
    "after_softmax" (added to the weights, not to the scores), "negated"
    (``-B``: ALiBi's distance with the wrong sign, ``i - j``), "shifted"
    (ALiBi's slopes ``2^(-8h/H)`` with ``h`` counted from 0, not 1; ``H`` a power of two) or "geometric"
    (``2^(-8(h+1)/H)`` for an ``H`` that is not a power of two, whose slopes the paper interleaves).  ``mask``
    "top_left" builds a causal_lower_right exercise's mask top-left instead.
    ``mask`` "diagonal": a causal mask that blocks the query's own key too;
    "upper": a causal mask on the wrong triangle, blocking the past.

    Issue 10 (mistakes from published tutorials and notebooks):
    ``divisor``: the scores divided by this number instead of ``√d_k``
    (a wrong constant, ``√L``, ``num_heads`` ...; overrides ``scale``).
    ``mask="added"``: a boolean keep-mask added to the scores as numbers
    (``scaled + 1`` where the query may attend, ``scaled + 0`` where not:
    what a bool mask cast to float does as SDPA's float ``attn_mask``).
    ``average_heads``: every head's weights replaced by their average over
    the heads (what ``nn.MultiheadAttention`` returns by default,
    ``average_attn_weights=True``), and used as such.
    ``split_reshape``: the heads split by reshaping ``[L, H·d_k]`` straight
    to ``[H, L, d_k]``, without the transpose (``q.view(B, H, L, d_k)``
    instead of ``q.view(B, L, H, d_k).transpose(1, 2)``): tokens and heads
    mixed.  ``merge_reshape``: the inverse when merging, ``[H, L, d_v]``
    reshaped straight to ``[L, H·d_v]`` (concat rows mixed).
    ``truncate``: ``round_scaled``/``round_weights`` cut the decimals off
    instead of rounding them.
    """

    scale: str = "sqrt_dk"
    kq: bool = False
    mask: str = "right"
    softmax: bool = True
    softmax_axis: int = -1
    normalise: bool = True
    empty_rows: str = "zero"
    round_scaled: int | None = None
    round_weights: int | None = None
    values: str = "v"
    heads_reversed: bool = False
    w_o_transposed: bool = False
    drop: frozenset[str] = field(default_factory=frozenset)
    kv_order: str = "repeat"  # format v2
    cache: str = "right"
    bias: str = "right"
    divisor: float | None = None
    average_heads: bool = False
    split_reshape: bool = False
    merge_reshape: bool = False
    truncate: bool = False
    # the backward pass (issue 13): the softmax's gradient "jacobian" (right), "elementwise" (no −rowsum) or
    # "diagonal" (P(1−P)∘d_weights: the Jacobian's diagonal alone);
    # grad_scale False = d_Q, d_K without 1/√d_k; d_k_transposed False = d_K from d_scaled·Q;
    # masked_grad "leak" = a blocked d_scaled entry left as d_weights − rowsum; bias_grad "mean" = rows averaged
    softmax_grad: str = "jacobian"
    grad_scale: bool = True
    d_k_transposed: bool = True
    masked_grad: str = "zero"
    bias_grad: str = "sum"
    d_k_order: str = "right"  # d_K's factors in the wrong order: "q_first" Q·d_scaledᵀ, "qt_first" Qᵀ·d_scaled
    kv_grad: str = "sum"  # grouped K/V heads: "own" = d_K, d_V from this query head only (not summed over the group)
    # RoPE (format v3, issue 23): "right"; "pairing" = the other pairing (rotate_half's on interleaved pairs, or
    # the reverse); "from_one" = positions counted from 1; "no_two" = θ_i = base^(−i/d_k), the 2 left out;
    # "rotate_v" = V turned as well as Q and K; the two layouts mixed (tutor.steps.rope.MIXED):
    # "half_interleaved_angles" = x·cos + rotate_half(x)·sin with cos, sin of repeat_interleave'd angles,
    # "interleaved_half_angles" = the pairs (2i, 2i+1) turned by cos, sin of cat([angles, angles])
    rope: str = "right"
    # the backward pass through RoPE (issue 23): "not_unrotated" = d_Q, d_K taken as d_Q_rot, d_K_rot (not turned
    # back); "forward" = turned forward by R(mθ) instead of back by R(mθ)ᵀ (the sign of sin not flipped)
    rope_grad: str = "right"
    # multi-head latent attention (format v3, mla): W_UK absorbed untransposed, Q·W_UK for Q·W_UKᵀ (chains when d_c = d_k)
    uk_untransposed: bool = False
    # the pre-norm block (issue 23): norm_axis 0 = each column of X normalized instead of each row; norm_mean = the
    # mean subtracted in RMSNorm (LayerNorm's centring); residual "none" = forgotten (the block's output is the
    # layer's), "x_norm" = added to the normalized X instead of X
    norm_axis: int = -1
    norm_mean: bool = False
    residual: str = "x"
    # post-norm (issue 23): "before_add" = X normalized, then the output added (Norm(X) + output, not Norm(X + output))
    post_norm: str = "right"

    def turned(self) -> frozenset[str]:
        """The names of the knobs this variant sets away from the right answer."""
        right = Variant()
        return frozenset(name for name in self.__dataclass_fields__ if getattr(self, name) != getattr(right, name))


RIGHT = Variant()
