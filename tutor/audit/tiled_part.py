"""A solution file's ``tiled:`` part: a worked online softmax, read as written, its problems at their places.

What the part says (which query row of which head, in blocks of what size,
and the quantities written: ``m``, ``alpha``, ``l``, ``acc`` per block, then
``o`` and ``lse``) is read here, with the rest of the solution file
(:mod:`tutor.audit.solution`); it is judged by :mod:`tutor.flash.check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..answers import Entry, entry_from_value
from ..base.errors import AnswerError, Problem
from ..base.messages import Msg, Text

if TYPE_CHECKING:
    from ..exercise.record import Exercise

Path = tuple[Any, ...]


class Reader(Protocol):
    """Where the part's problems go, each at its place (:class:`tutor.audit.solution.Reader` is one)."""

    problems: list[Problem]

    def add(self, path: Path, message: Text, hint: Text = "", *, key: bool = False) -> None: ...

#: The quantities of a block, in the order FlashAttention-2 updates them.
NAMES = ("m", "alpha", "l", "acc")


@dataclass(frozen=True)
class Quantity:
    """One written quantity: ``block`` (0-based; ``None`` for ``o`` and ``lse``), its name, its entries."""

    block: int | None
    name: str
    entries: tuple[Entry | None, ...]
    field: str


@dataclass(frozen=True)
class TiledGiven:
    """A solution file's ``tiled:`` part: which row of which head, in blocks of what size, and the quantities."""

    block_size: int
    head: int
    row: int
    quantities: tuple[Quantity, ...]


def _entries(r: Reader, path: Path, value: Any, vector: bool) -> tuple[Entry | None, ...] | None:
    items = value if vector else [value]
    if vector and (not isinstance(value, list) or not value):
        r.add(path, Msg("schema.expected", expected=Msg("expected.row"), found=str(value)))
        return None
    out: list[Entry | None] = []
    for i, v in enumerate(items):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(entry_from_value(v))
        except AnswerError as err:
            r.add(path + ((i,) if vector else ()), str(err))
            return None
    return tuple(out)


def _whole(v: Any) -> int | None:
    """A whole number as the YAML reader gives it (a number's text), else ``None``."""
    from ..exercise.yamlread import YNum

    if isinstance(v, YNum) and v.strip().isascii() and v.strip().isdigit():
        return int(v) if len(v.strip()) <= 6 else None  # int() refuses 4,300 digits; no count is that long
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_tiled(r: Reader, value: Any, ex: Exercise) -> TiledGiven | None:
    """The ``tiled:`` part of a solution file, its problems added to ``r`` (``None`` when it has any)."""
    p: Path = ("tiled",)
    if not isinstance(value, dict):
        r.add(p, Msg("tiled.file.mapping"))
        return None
    before = len(r.problems)
    for key in value:
        if key not in ("block_size", "query", "head", "blocks", "o", "lse"):
            r.add(p + (key,), Msg("tiled.file.unknown", name=str(key)), key=True)
    B = _whole(value.get("block_size"))
    if B is None or not 1 <= B <= 16:
        r.add(p + ("block_size",) if "block_size" in value else p, Msg("tiled.file.block_size"))
    head = _whole(value.get("head", 1))
    if head is None or not 1 <= head <= ex.num_heads:
        r.add(p + ("head",), Msg("tiled.file.head", last=ex.num_heads))
    q = value.get("query", 1)
    labels = list(ex.query_labels)
    n = _whole(q)
    row = n - 1 if n is not None and 1 <= n <= ex.L else labels.index(q) if isinstance(q, str) and q in labels else None
    if row is None:
        r.add(p + ("query",), Msg("tiled.file.query", labels=Msg.joined("list.sep", labels)))
    quantities: list[Quantity] = []
    blocks = value.get("blocks", [])
    if not isinstance(blocks, list):
        r.add(p + ("blocks",), Msg("tiled.file.blocks"))
        blocks = []
    for b, block in enumerate(blocks):
        if not isinstance(block, dict):
            r.add(p + ("blocks", b), Msg("tiled.file.blocks"))
            continue
        for name, v in block.items():
            if name not in NAMES:
                r.add(p + ("blocks", b, name), Msg("tiled.file.unknown", name=str(name)), key=True)
                continue
            got = _entries(r, p + ("blocks", b, name), v, name == "acc")
            if got is not None:
                quantities.append(Quantity(b, str(name), got, f"tiled.blocks[{b}].{name}"))
    for name in ("o", "lse"):
        if name in value:
            got = _entries(r, p + (name,), value[name], name == "o")
            if got is not None:
                quantities.append(Quantity(None, name, got, f"tiled.{name}"))
    if not quantities:
        r.add(p, Msg("tiled.file.empty"))
    if len(r.problems) > before:
        return None
    assert isinstance(B, int) and isinstance(head, int) and row is not None
    return TiledGiven(B, head - 1, row, tuple(quantities))
