"""``drill counts``: parameters, FLOPs, the memory of the weights tensor, and the KV cache, for given sizes.

The formulas are here, each with its source; the tests check them against
real layers (the arrays of :class:`tutor.numeric.MultiHeadAttention`, the
parameters of ``torch.nn.MultiheadAttention`` and of a grouped-query layer
built from ``nn.Linear``), against ``torch.utils.flop_counter`` on a real
forward, and against the byte size of the tensors a torch forward makes.
Sizes are those of real models: ``d_model`` from 512 to 8192, heads of
width 64 or 128, ``num_kv_heads`` = ``num_heads`` (multi-head), 8, 4 or 2
(grouped-query) or 1 (multi-query), contexts from 512 to 32k tokens.

A wrong answer that equals what a known mistake gives (a multiply-add
counted as one FLOP, K and V counted with ``num_heads``, the factor 2 for K
and V forgotten, bits for bytes, …) is named: each question lists its
mistakes (``variants``) and, for bytes, the dtype's size (``element``);
:func:`tutor.drills.record.count_fits` names them with the slips beside them
(GB written for GiB, elements for bytes, a number cut off).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from ..base.messages import t
from .record import Question, Variant

#: Bytes per element of the dtypes asked about (``torch.empty(0, dtype=...).element_size()``; a test checks).
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}

#: (d_model, num_heads) of real model sizes; d_k = d_v = d_model / num_heads (64 or 128).
MODELS = ((512, 8), (768, 12), (1024, 16), (2048, 16), (2048, 32), (4096, 32), (5120, 40), (8192, 64))


@dataclass(frozen=True)
class Layer:
    """One attention layer's sizes: ``W_Q [d_model, num_heads·d_k]``, ``W_K [d_model, num_kv_heads·d_k]``,
    ``W_V [d_model, num_kv_heads·d_v]``, ``W_O [num_heads·d_v, d_model]``; ``bias``: each has a bias."""

    d_model: int
    num_heads: int
    num_kv_heads: int
    d_k: int
    d_v: int
    bias: bool = True


# --- the formulas ----------------------------------------------------------------------------


def parameters(layer: Layer) -> dict[str, int]:
    """The parameters of one attention layer, by weight: ``W_Q``, ``W_K``, ``W_V``, ``W_O`` and, with
    ``bias``, ``b_Q``, ``b_K``, ``b_V``, ``b_O``.

    Source: Vaswani et al. 2017, section 3.2.2 (the projections
    ``W_i^Q, W_i^K, W_i^V`` of every head and ``W^O``); Ainslie et al. 2023,
    "GQA" (K and V projected to ``num_kv_heads`` heads).  Self-attention:
    K and V are projected from width ``d_model``.
    """
    D, H, Hkv, dk, dv = layer.d_model, layer.num_heads, layer.num_kv_heads, layer.d_k, layer.d_v
    parts = {"W_Q": D * H * dk, "W_K": D * Hkv * dk, "W_V": D * Hkv * dv, "W_O": H * dv * D}
    if layer.bias:
        parts.update({"b_Q": H * dk, "b_K": Hkv * dk, "b_V": Hkv * dv, "b_O": D})
    return parts


def forward_flops(layer: Layer, B: int, L_q: int, L_k: int) -> dict[str, int]:
    """The FLOPs of one forward, by matrix product: ``q_proj``, ``k_proj``, ``v_proj``, ``scores``
    (``Q·Kᵀ``), ``head_outputs`` (``weights·V``) and ``output`` (``W_O``).

    A product of ``[m, k]`` by ``[k, n]`` is ``m·n·k`` multiply-adds, and a
    multiply-add counts 2 FLOPs (the convention of Kaplan et al. 2020,
    "Scaling Laws for Neural Language Models", section 2.1, and of
    ``torch.utils.flop_counter``).  The softmax, the scaling, the mask and the
    biases are left out: they are not matrix products.  K and V are
    projected from ``L_k`` tokens of width ``d_model``.
    """
    D, H, Hkv, dk, dv = layer.d_model, layer.num_heads, layer.num_kv_heads, layer.d_k, layer.d_v
    return {
        "q_proj": 2 * B * L_q * D * H * dk,
        "k_proj": 2 * B * L_k * D * Hkv * dk,
        "v_proj": 2 * B * L_k * D * Hkv * dv,
        "scores": 2 * B * H * L_q * L_k * dk,
        "head_outputs": 2 * B * H * L_q * L_k * dv,
        "output": 2 * B * L_q * H * dv * D,
    }


def weights_bytes(B: int, num_heads: int, L_q: int, L_k: int, element: int) -> int:
    """The bytes of one layer's attention weights ``[B, num_heads, L_q, L_k]`` (the scores are the same size):
    ``B·num_heads·L_q·L_k·element``.  The shape is the trace's (:mod:`tutor.numeric.trace`)."""
    return B * num_heads * L_q * L_k * element


def kv_cache_bytes(layers: int, B: int, L: int, num_kv_heads: int, d_k: int, d_v: int, element: int) -> int:
    """The bytes of a KV cache holding ``L`` tokens: per layer, K ``[B, num_kv_heads, L, d_k]`` and
    V ``[B, num_kv_heads, L, d_v]``; with ``d_v = d_k`` that is ``2·layers·B·L·num_kv_heads·d_k·element``.

    Sources: the shapes of ``k_heads``/``v_heads`` in the trace; Shazeer 2019,
    "Fast Transformer Decoding: One Write-Head is All You Need" (one K/V head);
    Ainslie et al. 2023, "GQA" (``num_kv_heads`` K/V heads).
    """
    return layers * B * L * num_kv_heads * (d_k + d_v) * element


# --- questions ---------------------------------------------------------------------------------

QUANTITIES = ("params", "flops", "weights_memory", "kv_cache")


def questions(seed: int, count: int) -> list[Question]:
    """``count`` questions drawn with ``seed``, the four quantities in turn from a random start."""
    rng = random.Random(seed)
    start = rng.randrange(len(QUANTITIES))
    makers = {"params": params_question, "flops": flops_question, "weights_memory": memory_question,
              "kv_cache": kv_question}
    return [makers[QUANTITIES[(start + n) % len(QUANTITIES)]](rng, f"counts-{seed}-{n + 1}") for n in range(count)]


def random_layer(rng: random.Random, bias: bool = True) -> Layer:
    """A real model's layer sizes with multi-head, grouped-query or multi-query K/V heads."""
    d_model, H = rng.choice(MODELS)
    groups = [g for g in (8, 4, 2) if H % g == 0 and g < H]
    pick = rng.random()
    H_kv = H if pick < 0.35 else 1 if pick < 0.55 or not groups else rng.choice(groups)
    d = d_model // H
    return Layer(d_model, H, H_kv, d, d, bias)


def _grouping(layer: Layer) -> str:
    if layer.num_kv_heads == layer.num_heads:
        return t("drill.shapes.mha")
    if layer.num_kv_heads == 1:
        return t("drill.shapes.mqa")
    return t("drill.shapes.gqa", groups=layer.num_heads // layer.num_kv_heads)


def _layer_text(layer: Layer) -> str:
    return t("drill.counts.layer", d_model=layer.d_model, num_heads=layer.num_heads,
             num_kv_heads=layer.num_kv_heads, grouping=_grouping(layer), d=layer.d_k)


def _layer_fields(layer: Layer) -> dict[str, object]:
    return {"d_model": layer.d_model, "num_heads": layer.num_heads, "num_kv_heads": layer.num_kv_heads,
            "d_k": layer.d_k, "d_v": layer.d_v}


def _variants(answer: int | Fraction, candidates: Sequence[tuple[int | Fraction, str]]) -> tuple[Variant, ...]:
    """The known mistakes whose value differs from the answer, one variant per value: a later mistake
    giving an earlier one's value is kept beside it (``also``), since either may be what happened.
    Bits are not bytes: no unit or element slip stacks on them; float32's bytes are bytes of another
    dtype: no element slip stacks on them (:attr:`Variant.slips`)."""
    out: dict[int | Fraction, Variant] = {}
    for value, key in candidates:
        if value == answer or value <= 0:
            continue
        slips = SLIPS.get(key, ("unit", "elements"))
        if value in out:
            v = out[value]
            if key != v.key and all(key != a.key for a in v.also):
                out[value] = replace(v, also=v.also + (Variant(value, key, t(key), slips=slips),))
        else:
            out[value] = Variant(value, key, t(key), slips=slips)
    return tuple(out.values())


#: The slips that may stack on a mistake, where not both (:attr:`Variant.slips`).
SLIPS: dict[str, tuple[str, ...]] = {"drill.counts.memory.bits": (), "drill.counts.memory.fp32": ("unit",)}
#: Issue 23: mistakes of the inference kinds that count no bytes of the asked dtype (a time, tokens).
SLIPS.update({"drill.infer.decode.seconds": (), "drill.infer.decode.gib_bandwidth": (), "drill.infer.paged.tokens": (),
              "drill.infer.quant.unquantized": ("unit",), "drill.infer.quant.int4_byte": ("unit",),
              "drill.infer.quant.fp32_scales": ("unit",)})


def _n(value: int) -> str:
    return f"{value:,}"


def params_question(rng: random.Random, qid: str) -> Question:
    """Parameters of one layer, with or without biases."""
    bias = rng.random() < 0.5
    return parameters_question(random_layer(rng, bias), qid)


def parameters_question(layer: Layer, qid: str) -> Question:
    """The parameters of ``layer`` (with its biases or without, as ``layer.bias`` says), asked."""
    bias = layer.bias
    parts = parameters(layer)
    answer = sum(parts.values())
    D, H, Hkv, d = layer.d_model, layer.num_heads, layer.num_kv_heads, layer.d_k
    other = sum(parameters(Layer(D, H, Hkv, d, d, not bias)).values())
    candidates = [(other, "drill.counts.params.no_bias" if bias else "drill.counts.params.with_bias"),
                  (sum(parameters(Layer(D, H, H, d, d, bias)).values()), "drill.counts.params.kv_as_mha"),
                  (answer - parts["W_O"] - parts.get("b_O", 0), "drill.counts.params.no_w_o"),
                  (answer - parts["W_V"] - parts.get("b_V", 0), "drill.counts.params.no_v")]
    formulas = {"W_Q": "d_model·num_heads·d_k", "W_K": "d_model·num_kv_heads·d_k", "W_V": "d_model·num_kv_heads·d_v",
                "W_O": "num_heads·d_v·d_model", "b_Q": "num_heads·d_k", "b_K": "num_kv_heads·d_k",
                "b_V": "num_kv_heads·d_v", "b_O": "d_model"}
    explain = tuple(f"{name}: {formulas[name]} = {_n(v)}" for name, v in parts.items())
    explain += (t("drill.counts.total", total=_n(answer)), t("drill.counts.params.source"))
    return Question(
        drill="counts", topic="params", id=qid, kind="count",
        prompt=_layer_text(layer) + "\n" + t("drill.counts.params.ask" if bias else "drill.counts.params.ask_no_bias"),
        answer=answer, answer_text=_n(answer),
        config={"quantity": "params", **_layer_fields(layer), "bias": bias},
        hint=t("drill.counts.params.hint"), explain=explain,
        variants=_variants(answer, candidates), json={"unit": "params"},
    )


FLOP_PARTS = ("total", "projections", "scores", "head_outputs", "output")


def flops_question(rng: random.Random, qid: str) -> Question:
    """FLOPs of one self-attention forward (``L_q = L_k = L``): the total or one part."""
    layer = random_layer(rng, False)
    B = rng.choice((1, 2, 4, 8))
    L = rng.choice((128, 512, 1024, 2048, 4096))
    part = rng.choice(FLOP_PARTS)
    return forward_flops_question(layer, B, L, part, qid)


def forward_flops_question(layer: Layer, B: int, L: int, part: str, qid: str) -> Question:
    """The FLOPs of ``part`` (of :data:`FLOP_PARTS`) in one self-attention forward of ``layer`` with batch
    ``B`` and ``L_q = L_k = L``, asked; a layer without biases (they are not matrix products)."""
    layer = replace(layer, bias=False)
    parts = forward_flops(layer, B, L, L)
    chosen = {"total": tuple(parts), "projections": ("q_proj", "k_proj", "v_proj", "output"),
              "scores": ("scores",), "head_outputs": ("head_outputs",), "output": ("output",)}[part]
    answer = sum(parts[p] for p in chosen)
    mha = forward_flops(Layer(layer.d_model, layer.num_heads, layer.num_heads, layer.d_k, layer.d_v, False), B, L, L)
    candidates = [(answer // 2, "drill.counts.flops.one_per_mac")]
    if part == "total":
        candidates += [(answer - parts["output"], "drill.counts.flops.no_w_o"),
                       (parts["scores"] + parts["head_outputs"], "drill.counts.flops.core_only"),
                       (sum(mha.values()), "drill.counts.flops.kv_as_mha")]
    elif part == "projections":
        candidates += [(sum(mha[p] for p in chosen), "drill.counts.flops.kv_as_mha"),
                       (answer - parts["output"], "drill.counts.flops.no_w_o")]
    elif part in ("scores", "head_outputs"):
        candidates += [(answer // layer.num_heads, "drill.counts.flops.one_head"),
                       (answer // B, "drill.counts.flops.no_batch")]
    else:
        candidates += [(answer // B, "drill.counts.flops.no_batch")]
    formulas = {"q_proj": "2·B·L·d_model·num_heads·d_k", "k_proj": "2·B·L·d_model·num_kv_heads·d_k",
                "v_proj": "2·B·L·d_model·num_kv_heads·d_v", "scores": "2·B·num_heads·L·L·d_k",
                "head_outputs": "2·B·num_heads·L·L·d_v", "output": "2·B·L·num_heads·d_v·d_model"}
    explain = tuple(f"{name}: {formulas[name]} = {_n(parts[name])}" for name in chosen)
    explain += (t("drill.counts.total", total=_n(answer)), t("drill.counts.flops.source"))
    return Question(
        drill="counts", topic="flops", id=qid, kind="count",
        prompt=_layer_text(layer) + "\n" + t("drill.counts.flops.ask", B=B, L=L, part=t(f"drill.counts.flops.part.{part}")),
        answer=answer, answer_text=_n(answer),
        config={"quantity": "flops", **_layer_fields(layer), "bias": False, "B": B, "L_q": L, "L_k": L, "part": part},
        hint=t("drill.counts.flops.hint"), explain=explain,
        variants=_variants(answer, candidates), json={"unit": "flops"},
    )


def memory_question(rng: random.Random, qid: str) -> Question:
    """Bytes of one layer's attention weights tensor ``[B, num_heads, L, L]`` in a dtype."""
    layer = random_layer(rng)
    B = rng.choice((1, 2, 4, 8, 16))
    L = rng.choice((512, 1024, 2048, 4096, 8192))
    dtype = rng.choice(("float32", "float16", "bfloat16"))
    return weights_memory_question(B, layer.num_heads, L, dtype, qid)


def weights_memory_question(B: int, H: int, L: int, dtype: str, qid: str) -> Question:
    """The bytes of the attention weights ``[B, H, L, L]`` in ``dtype``, asked."""
    element = DTYPE_BYTES[dtype]
    answer = weights_bytes(B, H, L, L, element)
    candidates = [(answer * 8, "drill.counts.memory.bits"), (answer // H, "drill.counts.memory.one_head"),
                  (answer // B, "drill.counts.flops.no_batch"), (weights_bytes(B, H, L, L, 4), "drill.counts.memory.fp32")]
    explain = (f"B·num_heads·L·L·{element} = {B}·{H}·{L}·{L}·{element} = {_n(answer)} ({human_bytes(answer)})",
               t("drill.counts.memory.source"))
    return Question(
        drill="counts", topic="weights_memory", id=qid, kind="count",
        prompt=t("drill.counts.memory.ask", B=B, num_heads=H, L=L, dtype=dtype),
        answer=answer, answer_text=f"{_n(answer)} ({human_bytes(answer)})",
        config={"quantity": "weights_memory", "B": B, "num_heads": H, "L_q": L, "L_k": L, "dtype": dtype,
                "bytes_per_element": element},
        hint=t("drill.counts.memory.hint"), explain=explain,
        variants=_variants(answer, candidates), element=(dtype, element), json={"unit": "bytes"},
    )


def kv_question(rng: random.Random, qid: str) -> Question:
    """Bytes of the KV cache of a whole model at a context length, in a dtype."""
    layer = random_layer(rng)
    layers = rng.choice((12, 24, 32, 40, 48, 80))
    B = rng.choice((1, 4, 8, 16, 32))
    L = rng.choice((1024, 2048, 4096, 8192, 32768))
    dtype = rng.choice(("float32", "float16", "bfloat16", "int8"))
    return kv_cache_question(layer, layers, B, L, dtype, qid)


def kv_cache_question(layer: Layer, layers: int, B: int, L: int, dtype: str, qid: str) -> Question:
    """The bytes of the KV cache of ``layers`` such layers for ``B`` sequences of ``L`` tokens in ``dtype``, asked."""
    element = DTYPE_BYTES[dtype]
    H, Hkv, d = layer.num_heads, layer.num_kv_heads, layer.d_k
    answer = kv_cache_bytes(layers, B, L, Hkv, d, d, element)
    candidates = [(answer // 2, "drill.counts.kv.no_two"), (kv_cache_bytes(layers, B, L, H, d, d, element),
                                                            "drill.counts.kv.num_heads"),
                  (answer // layers, "drill.counts.kv.one_layer"), (answer * 8, "drill.counts.memory.bits"),
                  (kv_cache_bytes(layers, B, L, Hkv, d, d, 4), "drill.counts.memory.fp32")]
    explain: tuple[str, ...] = (f"2·layers·B·L·num_kv_heads·d_k·{element} = 2·{layers}·{B}·{L}·{Hkv}·{d}·{element} = "
                                f"{_n(answer)} ({human_bytes(answer)})", t("drill.counts.kv.source"))
    if dtype == "int8":  # the elements alone: a quantized cache also keeps its scales
        scales = kv_cache_bytes(layers, B, L, Hkv, 1, 1, DTYPE_BYTES["float16"])  # one float16 per token and K/V head
        explain += (t("drill.counts.kv.int8.scales", scales=_n(scales), human=human_bytes(scales)),)
    return Question(
        drill="counts", topic="kv_cache", id=qid, kind="count",
        prompt=t("drill.counts.kv.ask_int8" if dtype == "int8" else "drill.counts.kv.ask", layers=layers, B=B, L=L,
                 layer=_layer_text(layer), dtype=dtype),
        answer=answer, answer_text=f"{_n(answer)} ({human_bytes(answer)})",
        config={"quantity": "kv_cache", **_layer_fields(layer), "layers": layers, "B": B, "L": L, "dtype": dtype,
                "bytes_per_element": element},
        hint=t("drill.counts.kv.hint"), explain=explain,
        variants=_variants(answer, candidates), element=(dtype, element), json={"unit": "bytes"},
    )


def human_bytes(n: int) -> str:
    """``n`` bytes in the largest binary unit it reaches, to 3 significant figures below 100 of it and to a
    whole number (half up, thousands separated) from 100 on -- never in scientific notation, which wrote
    1004 GiB as ``1e+03 GiB``: ``16 GiB``, ``1.5 MiB``, ``1,004 GiB``.

    >>> human_bytes(17179869184), human_bytes(1536 * 1024), human_bytes(512), human_bytes(1_078_078_734_336)
    ('16 GiB', '1.5 MiB', '512 B', '1,004 GiB')
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            if n >= 100 * size:
                return f"{(2 * n + size) // (2 * size):,} {unit}"
            return f"{n / size:.3g} {unit}"
    return f"{n} B"
