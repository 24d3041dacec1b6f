"""``drill counts`` for inference: prefill and decode, PagedAttention, the caches of MLA, of a sliding window
and of a quantized cache -- for published model configurations or a configuration of one's own.

A :class:`Model` holds what the arithmetic needs (layers, heads, widths, the
vocabulary, the feed-forward width of a dense SwiGLU model, the context, the
bytes of an element; a sliding window or MLA's latent widths where the model
has them).  :data:`PRESETS` are published configurations, each number cited
where it is written; :func:`read_config` reads a YAML file of one's own with
the project's YAML reader and refuses a bad field in one line naming it.

Each question kind (:data:`KINDS`) draws one part to ask (a count, or a
ratio for the arithmetic intensity and a time for the bound at a memory
bandwidth), computes its answer here, and lists the known mistakes whose
value differs from it (:func:`tutor.drills.counts._variants`): the grading
of :func:`tutor.drills.record.count_fits` names a mistake and a unit slip
beside it (GB written where GiB was asked) as it does for every count.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from typing import Any

from ..base.errors import TutorError
from ..base.messages import join_sentences, t
from . import counts
from .record import COUNT_REL_TOL, Question

COUNT_REL_TOL_F = Fraction(str(COUNT_REL_TOL))

#: The question kinds of this module, in the order ``--kind`` lists them.
INFERENCE = ("prefill", "decode", "paged", "mla", "window", "quant")
#: Every kind ``drill counts`` asks: the four quantities of one layer (:mod:`.counts`), then those of inference.
KINDS = counts.QUANTITIES + INFERENCE


#: Bytes per element of the dtypes a model may be stored in: those the layer's questions ask about.
DTYPES = counts.DTYPE_BYTES


class ModelError(TutorError):
    """A model the drill cannot use: an unknown preset, a bad configuration file, or a kind the model
    does not have the sizes for (exit 2, one line)."""


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer's sizes, under the field names of a configuration file.

    ``ffn_dim``: the width of a dense SwiGLU feed-forward (``None``: not a
    dense model, no parameter count); ``tied_embeddings``: the output head is the embedding
    table; ``sliding_window``: tokens each layer attends to (``None``: all);
    ``kv_lora_rank``/``rope_head_dim``: MLA's ``d_c`` and ``d_h^R``
    (DeepSeek-V2, section 2.1), both or neither.
    """

    name: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    context: int
    ffn_dim: int | None = None
    dtype: str = "bfloat16"
    tied_embeddings: bool = False
    sliding_window: int | None = None
    kv_lora_rank: int | None = None
    rope_head_dim: int | None = None

    @property
    def dtype_bytes(self) -> int:
        """Bytes of one weight or cached value (``torch.empty(0, dtype=...).element_size()``; a test checks)."""
        return DTYPES[self.dtype]

    @property
    def element(self) -> tuple[str, int]:
        """The dtype and its bytes, as a question names elements counted for bytes."""
        return self.dtype, self.dtype_bytes

    def cached(self, L: int) -> int:
        """The tokens a sequence of ``L`` tokens keeps in the cache and attends to: ``min(L, sliding_window)``
        (Jiang et al. 2023, "Mistral 7B", section 2: a rolling buffer of fixed size W), else ``L``.  Every
        cache size, decode's attention and the bytes it reads go through here, so one quiz tells one size."""
        return L if self.sliding_window is None else min(L, self.sliding_window)

    @property
    def mla(self) -> bool:
        """Whether the model caches MLA's latent (``kv_lora_rank`` + ``rope_head_dim`` per token and layer)."""
        return self.kv_lora_rank is not None


#: Published configurations.  Every number is the one in the cited source:
#: - Llama 3.1: Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783), Table 3 (layers, model
#:   dimension, FFN dimension, attention heads, key/value heads), and each model's config.json on the Hugging
#:   Face Hub (meta-llama/Llama-3.1-8B, -70B, -405B: vocab_size 128256, max_position_embeddings 131072,
#:   tie_word_embeddings false, head_dim 128, torch_dtype bfloat16).
#: - Mistral 7B: Jiang et al. 2023, "Mistral 7B" (arXiv:2310.06825), Table 1 (dim 4096, n_layers 32,
#:   head_dim 128, hidden_dim 14336, n_heads 32, n_kv_heads 8, window_size 4096, context_len 8192,
#:   vocab_size 32000); config.json of mistralai/Mistral-7B-v0.1 (sliding_window 4096, untied, bfloat16).
#: - DeepSeek-V2: DeepSeek-AI 2024, "DeepSeek-V2" (arXiv:2405.04434), section 3.1.2 (60 layers, hidden
#:   dimension 5120, 128 heads of 128, d_c = 512, d_h^R = 64) and its abstract (a context of 128K tokens);
#:   config.json of deepseek-ai/DeepSeek-V2 (vocab_size 102400, kv_lora_rank 512, qk_rope_head_dim 64, bfloat16).
#:   A mixture of experts: no dense feed-forward width (no parameter count here).
PRESETS: dict[str, Model] = {m.name.lower(): m for m in (
    Model("Llama-3.1-8B", 32, 4096, 32, 8, 128, 128256, 131072, ffn_dim=14336),
    Model("Llama-3.1-70B", 80, 8192, 64, 8, 128, 128256, 131072, ffn_dim=28672),
    Model("Llama-3.1-405B", 126, 16384, 128, 8, 128, 128256, 131072, ffn_dim=53248),
    Model("Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 32000, 8192, ffn_dim=14336, sliding_window=4096),
    Model("DeepSeek-V2", 60, 5120, 128, 128, 128, 102400, 131072, kv_lora_rank=512, rope_head_dim=64),
)}


def preset(name: str) -> Model:
    """The preset called ``name`` (case does not matter); :class:`ModelError` naming the presets otherwise."""
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise ModelError(t("drill.infer.unknown_model", name=name[:60],
                           names=", ".join(m.name for m in PRESETS.values()))) from None


# --- the formulas --------------------------------------------------------------------------------


def parameters(m: Model) -> int:
    """All the parameters of a dense LLaMA-style model: the embedding table ``vocab·d_model``; per layer
    ``W_Q`` ``d_model·num_heads·head_dim``, ``W_K`` and ``W_V`` ``d_model·num_kv_heads·head_dim`` each,
    ``W_O`` ``num_heads·head_dim·d_model``, the SwiGLU feed-forward ``3·d_model·ffn_dim`` (gate, up, down)
    and two RMSNorm weights ``2·d_model``; the final norm ``d_model``; the output head ``vocab·d_model``
    unless tied.  No biases.  Raises ``ValueError`` when ``ffn_dim`` is ``None``.

    Sources: Touvron et al. 2023, "LLaMA", section 2.2 (pre-normalization with RMSNorm, SwiGLU);
    Shazeer 2020, "GLU Variants Improve Transformer" (three matrices); Ainslie et al. 2023 (GQA).
    """
    if m.ffn_dim is None:
        raise ValueError(f"{m.name} has no dense feed-forward width")
    embed = m.vocab_size * m.d_model
    norms = m.num_layers * 2 * m.d_model + m.d_model
    return matrix_parameters(m) + norms + (0 if m.tied_embeddings else embed)


def matrix_parameters(m: Model) -> int:
    """The parameters of the weight matrices a token is multiplied by: every layer's ``W_Q``, ``W_K``,
    ``W_V``, ``W_O`` and feed-forward, and the output head ``vocab·d_model`` (the embedding table is
    looked up, one row a token, not multiplied).  Raises ``ValueError`` without ``ffn_dim``."""
    if m.ffn_dim is None:
        raise ValueError(f"{m.name} has no dense feed-forward width")
    D, H, Hkv, d = m.d_model, m.num_heads, m.num_kv_heads, m.head_dim
    attention = D * H * d + 2 * D * Hkv * d + H * d * D
    return m.num_layers * (attention + 3 * D * m.ffn_dim) + m.vocab_size * D


def kv_values_per_token(m: Model) -> int:
    """The values one token adds to the cache, all layers: ``2·layers·num_kv_heads·head_dim`` (K and V),
    or with MLA ``layers·(kv_lora_rank + rope_head_dim)`` (the latent ``c_KV`` and the shared RoPE key;
    DeepSeek-V2, section 2.1.4 and Table 1)."""
    if m.mla:
        assert m.rope_head_dim is not None
        return m.num_layers * (m.kv_lora_rank or 0) + m.num_layers * m.rope_head_dim
    return 2 * m.num_layers * m.num_kv_heads * m.head_dim


def attention_flops_per_token(m: Model, L: int) -> int:
    """The FLOPs of ``Q·Kᵀ`` and ``weights·V`` for one new token attending to ``L`` tokens, all layers:
    ``4·layers·num_heads·head_dim·L`` (a multiply-add is 2 FLOPs)."""
    return 4 * m.num_layers * m.num_heads * m.head_dim * L


def decode_flops(m: Model, L: int) -> int:
    """The FLOPs of the matrix products for one decoded token at position ``L``, attending to the
    ``m.cached(L)`` tokens it keeps (``min(L, W)`` with a sliding window): ``2·matrix_parameters +
    4·layers·num_heads·head_dim·m.cached(L)``.

    Source: Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1 (``2N`` per token
    for ``N`` parameters); ``Q·Kᵀ`` and ``weights·V`` are ``2·num_heads·head_dim·L`` each per layer."""
    return 2 * matrix_parameters(m) + attention_flops_per_token(m, m.cached(L))


def decode_bytes(m: Model, B: int, L: int) -> int:
    """The bytes read by one decode step of ``B`` sequences of ``L`` tokens each: every weight matrix once
    (the batch shares it) plus each sequence's cache of ``m.cached(L)`` tokens (``min(L, W)`` with a sliding
    window): ``matrix_parameters·e + B·m.cached(L)·values·e``.
    Activations, norms and the one embedding row a token reads are left out (small beside these)."""
    e = m.dtype_bytes
    return matrix_parameters(m) * e + B * m.cached(L) * kv_values_per_token(m) * e


def prefill_flops(m: Model, P: int) -> int:
    """The FLOPs of the matrix products of a prefill of ``P`` tokens for one sequence, every token through
    every weight matrix (the output head included) and the full ``P×P`` score matrix, as a plain forward
    computes it before masking: ``2·matrix_parameters·P + 4·layers·num_heads·head_dim·P²``."""
    return 2 * matrix_parameters(m) * P + attention_flops_per_token(m, P) * P


def prefill_bytes(m: Model, B: int, P: int) -> int:
    """The bytes a prefill of ``B`` sequences of ``P`` tokens reads or writes, counting only the weights
    (read once) and the KV cache it leaves, ``m.cached(P)`` tokens a sequence (a rolling buffer keeps the last
    W): ``matrix_parameters·e + B·m.cached(P)·values·e``."""
    return decode_bytes(m, B, P)


def blocks(tokens: int, block_size: int) -> int:
    """PagedAttention's blocks for ``tokens`` tokens: ``⌈tokens / block_size⌉`` (Kwon et al. 2023, section 4.2:
    a request's KV cache is stored in fixed-size blocks, the last one filled from the left)."""
    return -(-tokens // block_size)


def quant_bytes(values: int, bits: int, group: int, scale_bytes: int = 2) -> int:
    """The bytes of ``values`` quantized to ``bits`` bits with one scale of ``scale_bytes`` per ``group``
    values (symmetric: no zero point): ``values·bits/8 + (values/group)·scale_bytes``."""
    return values * bits // 8 + values // group * scale_bytes


# --- drawing ---------------------------------------------------------------------------------------

CONTEXTS = (2048, 4096, 8192, 32768, 131072)
BATCHES = (1, 4, 8, 16, 32, 64)
#: Memory bandwidths asked about, in GB/s (1 GB = 10^9 bytes).
BANDWIDTHS = (1000, 2000, 3350)


def applies(kind: str, m: Model) -> bool:
    """Whether ``kind`` can be asked of ``m``: prefill and decode need a parameter count (a dense
    ``ffn_dim``), a layer's quantities, ``window`` and ``quant`` a cache of K and V heads, ``mla`` MLA's latent."""
    if kind in ("prefill", "decode"):  # MLA's projections are not W_Q, W_K, W_V: no matrix count here
        return m.ffn_dim is not None and not m.mla
    if kind in ("window", "quant") or kind in counts.QUANTITIES:
        return not m.mla
    if kind == "mla":
        return m.mla
    return True


def refuse(kind: str, m: Model) -> ModelError:
    """Why ``kind`` cannot be asked of ``m``, as an error: no parameter count, an MLA cache, no MLA latent."""
    why = "latent" if kind == "mla" else "dense" if kind in ("prefill", "decode") and not m.mla else "mla"
    return ModelError(t(f"drill.infer.not_for.{why}", model=m.name, kind=kind))


def contexts(m: Model) -> tuple[int, ...]:
    """The context lengths asked about for ``m``: those of :data:`CONTEXTS` it holds, and its own."""
    return tuple(sorted({c for c in CONTEXTS if c < m.context} | {m.context}))


def questions(seed: int, count: int, kinds: tuple[str, ...] | None = None, model: Model | None = None) -> list[Question]:
    """``count`` questions drawn with ``seed``, the ``kinds`` (of :data:`KINDS`; ``None``: every one) in
    turn from a random start.  With a ``model``, every question is about its sizes and the kinds it has no
    sizes for are left out; :class:`ModelError` when none is left.  Without, a layer's quantities are
    drawn as :func:`tutor.drills.counts.questions` draws them, and an inference kind picks a preset it
    applies to."""
    asked = tuple(kinds or KINDS)
    if model is not None:
        fitting = tuple(k for k in asked if applies(k, model))
        if not fitting:
            raise refuse(asked[0], model)
        asked = fitting
    rng = random.Random(seed)
    start = rng.randrange(len(asked))
    return [question(asked[(start + n) % len(asked)], rng, f"counts-{seed}-{n + 1}", model) for n in range(count)]


def question(kind: str, rng: random.Random, qid: str, model: Model | None) -> Question:
    """One question of ``kind`` for ``model`` (``None``: random layer sizes for a layer's quantity, a preset
    the kind applies to for the others); :class:`ModelError` when ``model`` has no sizes for it."""
    if model is not None and not applies(kind, model):
        raise refuse(kind, model)
    if kind in counts.QUANTITIES:
        return _layer_question(kind, rng, qid, model)
    m = model or rng.choice([p for p in PRESETS.values() if applies(kind, p)])
    return MAKERS[kind](m, rng, qid)


def _layer_question(kind: str, rng: random.Random, qid: str, model: Model | None) -> Question:
    """A layer's quantity (:data:`tutor.drills.counts.QUANTITIES`), for random sizes or ``model``'s (no biases)."""
    if model is None:
        makers = {"params": counts.params_question, "flops": counts.flops_question,
                  "weights_memory": counts.memory_question, "kv_cache": counts.kv_question}
        return makers[kind](rng, qid)
    layer = counts.Layer(model.d_model, model.num_heads, model.num_kv_heads, model.head_dim, model.head_dim, False)
    dtype = model.dtype
    # a layer's questions say nothing of a sliding window: only lengths it leaves whole (L <= W), so the
    # cache they count is the model's (issue 23 trial, F3)
    lengths = tuple(c for c in contexts(model) if model.cached(c) == c) or (model.cached(model.context),)
    if kind == "params":
        return counts.parameters_question(layer, qid)
    if kind == "flops":
        return counts.forward_flops_question(layer, rng.choice((1, 2, 4, 8)), rng.choice(lengths),
                                             rng.choice(counts.FLOP_PARTS), qid)
    if kind == "weights_memory":
        return counts.weights_memory_question(rng.choice((1, 2, 4, 8)), model.num_heads, rng.choice(lengths), dtype, qid)
    return counts.kv_cache_question(layer, model.num_layers, rng.choice((1, 4, 8, 16, 32)), rng.choice(lengths), dtype, qid)


def _n(value: int) -> str:
    return f"{value:,}"


def _model_text(m: Model) -> str:
    if m.mla:
        return t("drill.infer.model.mla", name=m.name, layers=m.num_layers, num_heads=m.num_heads,
                 head_dim=m.head_dim, d_c=m.kv_lora_rank, d_rope=m.rope_head_dim, dtype=m.dtype, e=m.dtype_bytes)
    text = t("drill.infer.model", name=m.name, layers=m.num_layers, num_heads=m.num_heads,
             num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, dtype=m.dtype, e=m.dtype_bytes)
    if m.sliding_window is not None:  # every question about it counts the rolling buffer (Model.cached)
        text = join_sentences([text, t("drill.infer.model.window", W=m.sliding_window)])
    return text


def _cached_text(m: Model) -> str:
    """How an explanation writes the tokens a sequence of ``L`` keeps: ``L``, or ``min(L, W)`` with a window."""
    return "L" if m.sliding_window is None else "min(L, W)"


def _variants(answer: int | Fraction, candidates: Sequence[tuple[int | Fraction, str]]) -> Any:
    """The mistakes (:func:`tutor.drills.counts._variants`).  For a ratio or a time, one within the grading's
    1% of the answer is left out: it would make only the exact value right, which no decimal typed is."""
    if isinstance(answer, Fraction) and answer.denominator != 1:
        candidates = [(v, key) for v, key in candidates if abs(Fraction(v) - answer) > COUNT_REL_TOL_F * answer]
    return counts._variants(answer, candidates)


def _bytes_text(n: int) -> str:
    return f"{n:,} ({counts.human_bytes(n)})"


def _decimal(x: Fraction) -> str:
    from .record import _decimal as decimal

    return decimal(x, 4)[0]


def _question(m: Model, kind: str, part: str, qid: str, prompt: str, answer: int | Fraction, answer_text: str,
              explain: tuple[str, ...], variants: Any, unit: str, config: dict[str, Any],
              element: tuple[str, int] | None = None) -> Question:
    return Question(
        drill="counts", topic=kind, id=qid, kind="count", prompt=prompt, answer=answer, answer_text=answer_text,
        config={"quantity": kind, "part": part, "model": m.name, "num_layers": m.num_layers,
                "num_heads": m.num_heads, "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim,
                "dtype": m.dtype, "bytes_per_element": m.dtype_bytes, **config},
        hint=t(f"drill.infer.{kind}.hint"), explain=explain, variants=variants, element=element,
        json={"unit": unit},
    )


# --- prefill and decode ------------------------------------------------------------------------------

DECODE_PARTS = ("flops", "bytes", "intensity", "time")


def decode_question(m: Model, rng: random.Random, qid: str, part: str | None = None, B: int | None = None,
                    L: int | None = None, bandwidth: int | None = None) -> Question:
    """One decode step: the FLOPs of one token, the bytes the step reads, its arithmetic intensity
    (FLOPs of the batch per byte read) or the time it takes at least at a memory bandwidth."""
    part = part or rng.choice(DECODE_PARTS)
    B = B or rng.choice(BATCHES)
    L = L or rng.choice(contexts(m))
    bandwidth = bandwidth or rng.choice(BANDWIDTHS)
    e, M = m.dtype_bytes, matrix_parameters(m)
    whole = replace(m, sliding_window=None)  # the mistake of keeping all L tokens
    kept = m.cached(L)  # the rolling buffer's tokens with a sliding window, else L
    kv = B * kept * kv_values_per_token(m) * e
    weights = M * e
    read = weights + kv
    flops = decode_flops(m, L)
    setting = "drill.infer.decode.setting" if m.sliding_window is None else "drill.infer.decode.setting_window"
    described = t(setting, model=_model_text(m), params=_n(M), B=B, L=L)
    config: dict[str, Any] = {"matrix_parameters": M, "B": B, "L": L}
    if part == "flops":
        answer: int | Fraction = flops
        candidates: list[tuple[int | Fraction, str]] = [
            (flops // 2, "drill.counts.flops.one_per_mac"), (2 * M, "drill.infer.decode.no_attention"),
            (B * flops, "drill.infer.decode.whole_batch"),
            (decode_flops(whole, L), "drill.infer.window.uncapped")]
        explain = (f"2·{_n(M)} + 4·layers·num_heads·head_dim·{_cached_text(m)} = 2·{_n(M)} + 4·{m.num_layers}·"
                   f"{m.num_heads}·{m.head_dim}·{kept} = {_n(flops)}", t("drill.infer.decode.flops.source"))
        prompt, text, unit = t("drill.infer.decode.ask.flops", setting=described), _n(flops), "flops"
    elif part == "bytes":
        answer = read
        candidates = [(weights, "drill.infer.decode.no_kv"), (kv, "drill.infer.decode.no_weights"),
                      (weights + kv // B, "drill.infer.decode.one_sequence"),
                      (B * weights + kv, "drill.infer.decode.weights_per_sequence"),
                      (weights + kv // 2, "drill.counts.kv.no_two"), (read * 8, "drill.counts.memory.bits"),
                      (decode_bytes(whole, B, L), "drill.infer.window.uncapped")]
        explain = (f"{_n(M)}·{e} + B·{_cached_text(m)}·{_n(kv_values_per_token(m))}·{e} = {_n(weights)} + {_n(kv)} = "
                   f"{_bytes_text(read)}",
                   t("drill.infer.decode.bytes.source"))
        prompt, text, unit = t("drill.infer.decode.ask.bytes", setting=described), _bytes_text(read), "bytes"
    elif part == "intensity":
        answer = Fraction(B * flops, read)
        candidates = [(Fraction(B * flops, weights), "drill.infer.decode.no_kv"),
                      (Fraction(flops, read), "drill.infer.decode.one_token"),
                      (answer / 2, "drill.counts.flops.one_per_mac"),
                      (Fraction(B * decode_flops(whole, L), decode_bytes(whole, B, L)), "drill.infer.window.uncapped")]
        explain = (f"B·FLOPs / bytes = {B}·{_n(flops)} / {_n(read)} = {_decimal(answer)}",
                   t("drill.infer.decode.intensity.source"))
        prompt, text, unit = t("drill.infer.decode.ask.intensity", setting=described), _decimal(answer), "ratio"
    else:
        answer = Fraction(read * 1000, bandwidth * 10**9)
        candidates = [(answer / 1000, "drill.infer.decode.seconds"),
                      (Fraction(read * 1000, bandwidth * 2**30), "drill.infer.decode.gib_bandwidth"),
                      (Fraction(weights * 1000, bandwidth * 10**9), "drill.infer.decode.no_kv"),
                      (Fraction(decode_bytes(whole, B, L) * 1000, bandwidth * 10**9),
                       "drill.infer.window.uncapped")]
        explain = (f"{_n(read)} B / ({bandwidth}·10^9 B/s) = {_decimal(answer)} ms", t("drill.infer.decode.time.source"))
        prompt = t("drill.infer.decode.ask.time", setting=described, bandwidth=_n(bandwidth))
        text, unit = f"{_decimal(answer)} ms", "ms"
        config["bandwidth_GB_per_s"] = bandwidth
    return _question(m, "decode", part, qid, prompt, answer, text, explain,
                     _variants(answer, candidates), unit, config,
                     element=m.element if part == "bytes" else None)


PREFILL_PARTS = ("flops", "intensity")


def prefill_question(m: Model, rng: random.Random, qid: str, part: str | None = None, B: int | None = None,
                     P: int | None = None) -> Question:
    """A prefill of ``B`` prompts of ``P`` tokens: its FLOPs (one prompt), or its arithmetic intensity
    (the batch's FLOPs per byte of weights read and cache written) -- the contrast with decode."""
    part = part or rng.choice(PREFILL_PARTS)
    B = B or rng.choice((1, 4, 8))
    P = P or rng.choice([c for c in contexts(m) if c <= 8192] or [min(contexts(m))])
    M = matrix_parameters(m)
    flops = prefill_flops(m, P)
    attention = attention_flops_per_token(m, P) * P
    described = t("drill.infer.prefill.setting", model=_model_text(m), params=_n(M), B=B, P=P)
    if m.sliding_window is not None:  # the window is a mask: the plain forward's P×P scores are counted all the same
        described = join_sentences([described, t("drill.infer.prefill.window", W=m.sliding_window)])
    config: dict[str, Any] = {"matrix_parameters": M, "B": B, "P": P}
    if part == "flops":
        answer: int | Fraction = flops
        candidates: list[tuple[int | Fraction, str]] = [
            (flops // 2, "drill.counts.flops.one_per_mac"), (2 * M * P, "drill.infer.prefill.no_attention"),
            (2 * M * P + attention // 2, "drill.infer.prefill.causal_half"), (2 * M + attention // P, "drill.infer.prefill.one_token")]
        explain = (f"2·{_n(M)}·P + 4·layers·num_heads·head_dim·P² = 2·{_n(M)}·{P} + 4·{m.num_layers}·{m.num_heads}·"
                   f"{m.head_dim}·{P}² = {_n(flops)}", t("drill.infer.prefill.source"))
        prompt, text, unit = t("drill.infer.prefill.ask.flops", setting=described), _n(flops), "flops"
    else:
        moved = prefill_bytes(m, B, P)
        answer = Fraction(B * flops, moved)
        candidates = [(Fraction(flops, moved), "drill.infer.decode.one_token"),
                      (Fraction(B * flops, M * m.dtype_bytes), "drill.infer.prefill.no_kv"),
                      (answer / 2, "drill.counts.flops.one_per_mac"),
                      (Fraction(B * flops, prefill_bytes(replace(m, sliding_window=None), B, P)),
                       "drill.infer.window.uncapped")]
        explain = (f"B·FLOPs / bytes = {B}·{_n(flops)} / {_n(moved)} = {_decimal(answer)}",
                   t("drill.infer.prefill.intensity.source"))
        prompt, text, unit = t("drill.infer.prefill.ask.intensity", setting=described), _decimal(answer), "ratio"
    return _question(m, "prefill", part, qid, prompt, answer, text, explain,
                     _variants(answer, candidates), unit, config)


# --- PagedAttention ----------------------------------------------------------------------------------

PAGED_PARTS = ("blocks", "waste", "fit")
BLOCK_SIZES = (8, 16, 32)
#: KV memory sizes asked about, in GiB.
KV_MEMORY = (16, 24, 40, 60)


def paged_question(m: Model, rng: random.Random, qid: str, part: str | None = None, block_size: int | None = None,
                   tokens: int | None = None, memory_gib: int | None = None) -> Question:
    """PagedAttention (Kwon et al. 2023): a request's blocks, the bytes its last block leaves unused, or
    how many such requests fit in a given KV memory."""
    part = part or rng.choice(PAGED_PARTS)
    b = block_size or rng.choice(BLOCK_SIZES)
    most = m.cached(min(m.context, 8192))  # a rolling buffer holds at most W tokens of a request
    n = tokens or rng.randrange(min(100, most), most + 1)
    if n % b == 0 and tokens is None:  # a last block partly empty: a waste to ask about
        n -= 1
    memory_gib = memory_gib or rng.choice(KV_MEMORY)
    per_token = kv_values_per_token(m) * m.dtype_bytes
    nb = blocks(n, b)
    described = t("drill.infer.paged.setting", model=_model_text(m), per_token=_n(per_token), b=b, n=n)
    config: dict[str, Any] = {"block_size": b, "tokens": n, "kv_bytes_per_token": per_token}
    element: tuple[str, int] | None = None
    if part == "blocks":
        answer = nb
        candidates = [(n // b, "drill.infer.paged.floor"), (nb + 1, "drill.infer.paged.extra_block")]
        explain = (f"⌈{n} / {b}⌉ = {nb}", t("drill.infer.paged.source"))
        prompt, text, unit = t("drill.infer.paged.ask.blocks", setting=described), _n(nb), "blocks"
    elif part == "waste":
        free = nb * b - n
        answer = free * per_token
        candidates = [((n % b) * per_token, "drill.infer.paged.used_part"), (free, "drill.infer.paged.tokens"),
                      (answer // 2, "drill.counts.kv.no_two"), (answer * 8, "drill.counts.memory.bits")]
        explain = (f"(⌈{n} / {b}⌉·{b} − {n})·{_n(per_token)} = {free}·{_n(per_token)} = {_bytes_text(answer)}",
                   t("drill.infer.paged.source"))
        prompt, text, unit = t("drill.infer.paged.ask.waste", setting=described), _bytes_text(answer), "bytes"
        element = m.element
    else:
        memory = memory_gib * 2**30
        answer = memory // (nb * b * per_token)
        candidates = [(memory // (n * per_token), "drill.infer.paged.no_rounding"),
                      (memory_gib * 10**9 // (nb * b * per_token), "drill.infer.paged.gb"),
                      (memory // (nb * b * per_token // 2), "drill.counts.kv.no_two")]
        explain = (f"⌊{memory_gib}·2^30 / ({nb}·{b}·{_n(per_token)})⌋ = {_n(answer)}", t("drill.infer.paged.source"))
        prompt = t("drill.infer.paged.ask.fit", setting=described, memory=memory_gib)
        text, unit = _n(answer), "requests"
        config["kv_memory_GiB"] = memory_gib
    return _question(m, "paged", part, qid, prompt, answer, text, explain,
                     _variants(answer, candidates), unit, config, element)


# --- the caches: MLA, a sliding window, quantized ---------------------------------------------------------


def _sizes(m: Model, rng: random.Random, B: int | None, L: int | None) -> tuple[int, int]:
    return B or rng.choice(BATCHES[:4]), L or rng.choice(contexts(m))


def mla_question(m: Model, rng: random.Random, qid: str, B: int | None = None, L: int | None = None) -> Question:
    """The KV cache of MLA: ``B·L·layers·(d_c + d_h^R)·e`` bytes (DeepSeek-V2, section 2.1, Table 1)."""
    B, L = _sizes(m, rng, B, L)
    assert m.kv_lora_rank is not None and m.rope_head_dim is not None
    d_c, d_r, e, layers = m.kv_lora_rank, m.rope_head_dim, m.dtype_bytes, m.num_layers
    answer = B * L * layers * (d_c + d_r) * e
    candidates: list[tuple[int | Fraction, str]] = [
        (2 * answer, "drill.infer.mla.two"), (B * L * layers * d_c * e, "drill.infer.mla.no_rope"),
        (B * L * layers * (d_c + m.num_heads * d_r) * e, "drill.infer.mla.rope_per_head"),
        (B * L * layers * 2 * m.num_heads * m.head_dim * e, "drill.infer.mla.as_mha"),
        (answer // layers, "drill.counts.kv.one_layer"), (answer * 8, "drill.counts.memory.bits")]
    explain = (f"B·L·layers·(d_c + d_h^R)·{e} = {B}·{L}·{layers}·({d_c} + {d_r})·{e} = {_bytes_text(answer)}",
               t("drill.infer.mla.source"))
    prompt = t("drill.infer.mla.ask", model=_model_text(m), B=B, L=L)
    return _question(m, "mla", "cache", qid, prompt, answer, _bytes_text(answer), explain,
                     _variants(answer, candidates), "bytes",
                     {"kv_lora_rank": d_c, "rope_head_dim": d_r, "B": B, "L": L}, m.element)


WINDOWS = (1024, 4096, 8192)


def window_question(m: Model, rng: random.Random, qid: str, B: int | None = None, L: int | None = None,
                    window: int | None = None) -> Question:
    """The KV cache of a sliding window of ``W`` tokens: ``2·layers·B·min(L, W)·num_kv_heads·head_dim·e``
    (Jiang et al. 2023, "Mistral 7B", section 2: the rolling buffer cache of fixed size W)."""
    W = window or m.sliding_window or rng.choice([w for w in WINDOWS if w < m.context] or [max(1, m.context // 2)])
    B = B or rng.choice(BATCHES[:4])
    L = L or rng.choice([c for c in contexts(m) if c > W] or [m.context])
    e, layers, Hkv, d = m.dtype_bytes, m.num_layers, m.num_kv_heads, m.head_dim
    kept = m.cached(L) if W == m.sliding_window else min(L, W)  # the model's own window: the rule of every question
    answer = 2 * layers * B * kept * Hkv * d * e
    candidates: list[tuple[int | Fraction, str]] = [
        (2 * layers * B * L * Hkv * d * e, "drill.infer.window.uncapped"), (answer // 2, "drill.counts.kv.no_two"),
        (2 * layers * B * kept * m.num_heads * d * e, "drill.counts.kv.num_heads"),
        (answer // layers, "drill.counts.kv.one_layer"), (answer * 8, "drill.counts.memory.bits")]
    explain = (f"2·layers·B·min(L, W)·num_kv_heads·head_dim·{e} = 2·{layers}·{B}·{kept}·{Hkv}·{d}·{e} = "
               f"{_bytes_text(answer)}", t("drill.infer.window.source"))
    key = "drill.infer.window.ask" if m.sliding_window == W else "drill.infer.window.ask_if"
    prompt = t(key, model=_model_text(m), W=W, B=B, L=L)
    return _question(m, "window", "cache", qid, prompt, answer, _bytes_text(answer), explain,
                     _variants(answer, candidates), "bytes", {"sliding_window": W, "B": B, "L": L},
                     m.element)


def quant_question(m: Model, rng: random.Random, qid: str, B: int | None = None, L: int | None = None,
                   bits: int | None = None, group: int | None = None) -> Question:
    """A KV cache quantized to int8 or int4 with one float16 scale per group of ``G`` values along
    ``head_dim`` (symmetric, no zero point): ``N·bits/8 + (N/G)·2`` bytes for ``N`` cached values."""
    B, L = _sizes(m, rng, B, L)
    bits = bits or rng.choice((8, 4))
    group = group or rng.choice([g for g in (32, 64, 128) if m.head_dim % g == 0] or [m.head_dim])
    N = 2 * m.num_layers * B * m.cached(L) * m.num_kv_heads * m.head_dim
    answer = quant_bytes(N, bits, group)
    candidates: list[tuple[int | Fraction, str]] = [
        (N * bits // 8, "drill.infer.quant.no_scales"), (quant_bytes(N, bits, group, 4), "drill.infer.quant.fp32_scales"),
        (quant_bytes(N, 8, group), "drill.infer.quant.int4_byte") if bits == 4 else (0, ""),
        (N * bits // 8 + 2 * N, "drill.infer.quant.scale_per_value"), (quant_bytes(N // 2, bits, group), "drill.counts.kv.no_two"),
        (N * m.dtype_bytes, "drill.infer.quant.unquantized"), (answer * 8, "drill.counts.memory.bits"),
        (quant_bytes(N // m.cached(L) * L, bits, group), "drill.infer.window.uncapped")]
    explain = (f"N = 2·layers·B·{_cached_text(m)}·num_kv_heads·head_dim = 2·{m.num_layers}·{B}·{m.cached(L)}·"
               f"{m.num_kv_heads}·{m.head_dim} = {_n(N)}",
               f"N·{bits}/8 + (N/{group})·2 = {_n(N * bits // 8)} + {_n(N // group * 2)} = {_bytes_text(answer)}",
               t("drill.infer.quant.source"))
    prompt = t("drill.infer.quant.ask", model=_model_text(m), B=B, L=L, bits=bits, G=group)
    return _question(m, "quant", f"int{bits}", qid, prompt, answer, _bytes_text(answer), explain,
                     _variants(answer, [c for c in candidates if c[1]]), "bytes",
                     {"bits": bits, "group": group, "scale_bytes": 2, "B": B, "L": L})


MAKERS: dict[str, Callable[[Model, random.Random, str], Question]] = {"prefill": prefill_question, "decode": decode_question, "paged": paged_question, "mla": mla_question,
          "window": window_question, "quant": quant_question}


# --- a configuration of one's own ---------------------------------------------------------------------------

#: The fields of a configuration file: (least, largest) for a whole number; ``None`` for another type.
LIMITS: dict[str, tuple[int, int] | None] = {
    "num_layers": (1, 1000), "d_model": (1, 1 << 20), "num_heads": (1, 4096), "num_kv_heads": (1, 4096),
    "head_dim": (1, 65536), "vocab_size": (1, 10**7), "context": (1, 1 << 24), "ffn_dim": (1, 1 << 22),
    "sliding_window": (1, 1 << 24), "kv_lora_rank": (1, 65536), "rope_head_dim": (1, 65536),
    "name": None, "dtype": None, "tied_embeddings": None,
}
REQUIRED = ("num_layers", "d_model", "num_heads", "vocab_size", "context")
_WHOLE = re.compile(r"[0-9]+")


def read_config(path: str) -> Model:
    """The model a YAML configuration file describes (fields of :data:`LIMITS`; ``num_kv_heads`` defaults
    to ``num_heads``, ``head_dim`` to ``d_model / num_heads``, ``dtype`` to bfloat16, ``name`` to the
    file's).  Read with :func:`tutor.exercise.yamlread.parse_yaml` (YAML 1.2, safe: no objects, no
    code).  Raises :class:`ModelError` with one line -- ``file:line:column: field: what is wrong`` -- for
    the first problem: unreadable, not YAML, not a mapping, an unknown or missing field, a value of the
    wrong type or out of range, sizes that do not fit together."""
    from ..exercise.yamlread import YNum, parse_yaml, read_text

    text, problems = read_text(path)
    if text is None:
        raise ModelError(str(problems[0]))
    doc = parse_yaml(text, path)
    if doc.problems:  # the reader's hints speak of an exercise: say what a configuration needs (rope trial F6)
        said = {t(f"yaml.{key}.hint"): t(f"config.yaml.{key}.hint")
                for key in ("empty", "key_type", "too_deep", "merge_key", "top_level")}
        first = doc.problems[0]
        raise ModelError(str(replace(first, hint=said.get(str(first.hint), first.hint))))
    if not isinstance(doc.value, dict):
        raise ModelError(str(doc.problem((), t("drill.infer.config.not_mapping"))))

    def fail(name: str, message: str) -> ModelError:
        return ModelError(str(doc.problem((name,), message)))

    values: dict[str, Any] = {}
    for name, value in doc.value.items():
        if name not in LIMITS:
            raise ModelError(str(doc.problem((str(name),), t("drill.infer.config.unknown", fields=", ".join(LIMITS)),
                                             key=True)))
        limits = LIMITS[name]
        if value is None:
            continue
        if name == "name":
            if not isinstance(value, str) or not value.strip() or len(value) > 60:
                raise fail(name, t("drill.infer.config.name"))
            values[name] = value.strip()
        elif name == "dtype":
            if not isinstance(value, str) or value not in DTYPES:
                raise fail(name, t("drill.infer.config.dtype", dtypes=", ".join(DTYPES), found=_shown(value)))
            values[name] = value
        elif name == "tied_embeddings":
            if not isinstance(value, bool):
                raise fail(name, t("drill.infer.config.bool", found=_shown(value)))
            values[name] = value
        else:
            assert limits is not None
            low, high = limits
            if not isinstance(value, YNum) or not _WHOLE.fullmatch(value) \
                    or len(value) > 12 or not low <= int(value) <= high:
                raise fail(name, t("drill.infer.config.whole", low=_n(low), high=_n(high), found=_shown(value)))
            values[name] = int(value)
    missing = [f for f in REQUIRED if f not in values]
    if missing:
        raise ModelError(str(doc.problem((), t("drill.infer.config.missing", field=missing[0]))))
    H = values["num_heads"]
    values.setdefault("num_kv_heads", H)
    if H % values["num_kv_heads"]:
        raise fail("num_kv_heads", t("drill.infer.config.groups", num_heads=H, found=values["num_kv_heads"]))
    if "head_dim" not in values:
        if values["d_model"] % H:
            raise fail("num_heads", t("drill.infer.config.head_dim", d_model=values["d_model"], num_heads=H))
        values["head_dim"] = values["d_model"] // H
    if ("kv_lora_rank" in values) != ("rope_head_dim" in values):
        raise fail("kv_lora_rank" if "kv_lora_rank" in values else "rope_head_dim", t("drill.infer.config.mla_pair"))
    if "sliding_window" in values and values["sliding_window"] >= values["context"]:
        raise fail("sliding_window", t("drill.infer.config.window", window=_n(values["sliding_window"]),
                                       context=_n(values["context"])))
    values.setdefault("name", os.path.basename(path))
    known = {f.name for f in fields(Model)}
    return Model(**{k: v for k, v in values.items() if k in known})


def _shown(value: Any) -> str:
    from ..exercise.yamlread import describe

    return describe(value)
