"""An exercise's masks as PyTorch takes them: every argument of the call, spelled for ``B = 1``.

``nn.MultiheadAttention`` takes ``attn_mask`` True = blocked and
``key_padding_mask`` True = padding; ``F.scaled_dot_product_attention`` an
``attn_mask`` True = may attend (or a float one, added to the scaled
scores), ``is_causal``, and ``enable_gqa`` for grouped K/V heads (PyTorch
2.13's docs of both).  A test runs every spelling through torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from ..base.messages import Msg, Text
from ..exercise.record import Exercise


@dataclass(frozen=True)
class TorchMask:
    """One mask argument of an exercise, as a PyTorch call takes it for the batch of one (``B = 1``).

    ``api``: ``"mha"`` (``nn.MultiheadAttention(..., batch_first=True)``) or
    ``"sdpa"`` (``F.scaled_dot_product_attention``); ``argument``:
    ``"attn_mask"``, ``"key_padding_mask"`` or ``"is_causal"``; ``value``:
    the boolean entries (nested tuples) or ``True`` for ``is_causal``;
    ``combined``: an SDPA ``attn_mask`` that holds the mask and the key
    padding in one.
    """

    api: Literal["mha", "sdpa", "cache"]
    argument: str
    value: bool | tuple
    combined: bool = False
    # format v2 (decoder_masks): the code when it is not torch.tensor(value), and its kind
    call: str = ""
    float_mask: bool = False  # value holds exact texts ("1/16", "-inf"): a float attn_mask added to the scores
    lower_right: bool = False  # attn_mask=causal_lower_right(L_q, L_k) of torch.nn.attention.bias

    @property
    def api_name(self) -> Text:
        """``nn.MultiheadAttention``, ``F.scaled_dot_product_attention`` or the KV cache."""
        names: dict[str, Text] = {"mha": "nn.MultiheadAttention", "sdpa": "F.scaled_dot_product_attention",
                                  "cache": Msg("production.api.cache")}
        return names[self.api]

    @property
    def kind(self) -> str:
        """``mha.attn_mask``, ``mha.key_padding_mask``, ``sdpa.attn_mask[.combined|.float|.lower_right]``,
        ``sdpa.is_causal``, ``sdpa.enable_gqa`` or ``cache.cat``."""
        extra = ".combined" if self.combined else ".float" if self.float_mask else ".lower_right" if self.lower_right else ""
        return f"{self.api}.{self.argument}" + extra

    def code(self) -> str:
        """``attn_mask=torch.tensor([[False, True], [False, False]])`` or ``is_causal=True``."""
        if self.call:
            return self.call
        if isinstance(self.value, bool):
            return f"{self.argument}={self.value}"
        return f"{self.argument}=torch.tensor({_literal(self.value)})"


def _literal(value: bool | tuple) -> str:
    if isinstance(value, bool):
        return str(value)
    return "[" + ", ".join(_literal(v) for v in value) + "]"


def pytorch_masks(ex: Exercise) -> tuple[TorchMask, ...]:
    """The masks of ``ex`` as ``nn.MultiheadAttention`` and ``F.scaled_dot_product_attention`` take them (``B = 1``).

    ``nn.MultiheadAttention``: ``attn_mask = ~mask`` ``[L, S]`` (True =
    blocked) and ``key_padding_mask = ~key_padding`` ``[1, S]`` (True =
    padding).  SDPA: ``is_causal=True`` for a causal mask alone, else one
    ``attn_mask`` ``[L, S]`` = mask AND key padding (True = may attend),
    which broadcasts over the batch of one and the heads.  Empty when the
    exercise has no mask.  A test runs every spelling through PyTorch.
    An exercise of format v2 is spelled as a decoder calls SDPA
    (:func:`decoder_masks`).
    """
    if ex.is_v2 or ex.mask_kind == "causal_lower_right":
        return decoder_masks(ex)
    out: list[TorchMask] = []
    if ex.mask is not None:
        out.append(TorchMask("mha", "attn_mask", tuple(tuple(not a for a in row) for row in ex.mask)))
    if ex.key_padding is not None:
        out.append(TorchMask("mha", "key_padding_mask", (tuple(not real for real in ex.key_padding),)))
    allowed = ex.allowed()
    if ex.mask_kind == "causal" and ex.key_padding is None:
        out.append(TorchMask("sdpa", "is_causal", True))
    elif allowed is not None:
        out.append(TorchMask("sdpa", "attn_mask", allowed, combined=ex.key_padding is not None and ex.mask is not None))
    return tuple(out)


def decoder_masks(ex: Exercise) -> tuple[TorchMask, ...]:
    """The PyTorch spelling of a v2 exercise's attention call (:class:`TorchMask` rows, ``B = 1``).

    ``F.scaled_dot_product_attention``: ``enable_gqa=True`` with grouped K/V heads; the mask as
    ``attn_mask=causal_lower_right(L_q, L_k)`` (``torch.nn.attention.bias``), ``is_causal=True`` (top-left),
    a boolean ``attn_mask`` (True = may attend), or, with a bias, one float ``attn_mask`` added to the scaled
    scores (the bias, ``-inf`` where blocked).  With a cache, the ``torch.cat`` that appends the new rows.
    A test runs every spelling through torch.
    """
    out: list[TorchMask] = []
    if ex.has_cache:
        out.append(TorchMask("cache", "cat", True, call="k = torch.cat([k_cache, k_new], dim=-2); "
                                                        "v = torch.cat([v_cache, v_new], dim=-2)"))
    allowed = ex.allowed()
    if ex.bias is not None:
        rows = []
        for h in range(ex.num_heads):
            rows.append(tuple(tuple("-inf" if allowed is not None and not allowed[i][j] else str(b)
                                    for j, b in enumerate(row)) for i, row in enumerate(ex.bias[h])))
        value = tuple(rows) if len(set(rows)) > 1 else rows[0]
        out.append(TorchMask("sdpa", "attn_mask", value, call="attn_mask=torch.tensor(" + _floats(value) +
                             ", dtype=torch.float64)", float_mask=True))
    elif ex.mask_kind == "causal_lower_right" and ex.key_padding is None:
        out.append(TorchMask("sdpa", "attn_mask", allowed or (), call=f"attn_mask=causal_lower_right({ex.L}, {ex.L_k})",
                             lower_right=True))
    elif ex.mask_kind == "causal" and ex.key_padding is None:
        out.append(TorchMask("sdpa", "is_causal", True))
    elif allowed is not None:
        out.append(TorchMask("sdpa", "attn_mask", allowed, combined=ex.key_padding is not None and ex.mask is not None))
    if ex.grouped:
        out.append(TorchMask("sdpa", "enable_gqa", True))
    return tuple(out)


def _floats(value: tuple) -> str:
    """Nested tuples of exact texts (``"1/16"``, ``"-inf"``) as a Python literal of floats torch.tensor takes."""
    if isinstance(value, str):
        return "float('-inf')" if value == "-inf" else repr(float(Fraction(value)))
    return "[" + ", ".join(_floats(v) for v in value) + "]"
