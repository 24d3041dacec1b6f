"""The katas, in the order ``attn-tutor code list`` shows them, and how to find one.

Each kata lives in its own module (:mod:`.mha`, :mod:`.sdpa`, …) as a
module-level ``KATA``; this table is the one list of them.
"""

from __future__ import annotations

from importlib import import_module

from ..base.errors import NotFoundError
from ..base.messages import t
from ..base.textsafe import shown
from .kata import Kata

__all__ = ["IDS", "get", "katas"]

#: Kata id -> the module that defines it, in the order they are listed and learnt.
_MODULES = {
    "mha": "mha",
    "sdpa": "sdpa",
    "masks": "masks",
    "cross": "cross",
    "gqa": "gqa",
    "kv-cache": "kv_cache",
    "flash": "flash",
    "backward": "backward",
    "rope": "rope",
}
IDS = tuple(_MODULES)


def get(id: str) -> Kata:
    """The kata ``id``.  Raises :class:`NotFoundError` naming the katas there are."""
    if id not in _MODULES:
        name = id if len(id) <= 40 else id[:40] + "…"
        raise NotFoundError(t("code.no_such_kata", kata=shown(name), katas=", ".join(IDS)))
    kata: Kata = import_module(f"{__package__}.{_MODULES[id]}").KATA
    return kata


def katas() -> tuple[Kata, ...]:
    """Every kata, in order."""
    return tuple(get(id) for id in IDS)
