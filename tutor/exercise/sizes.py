"""Shape voting: every size of an exercise decided from the fields that agree on it.

Each field says what it implies of a size (``w_k`` with 3 columns: d_k = 3);
:class:`Sizes` decides each size by the most votes, so one wrong field is
one problem, named with the fields that outvote it as evidence
("columns of w_q and w_k"), and the fields it disagrees with are not blamed.
:mod:`.checks` casts the votes and reports the fields that disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from tutor.base.messages import join_and, t
from tutor.exercise.yamlread import Document, Path, format_path


@dataclass
class _Claim:
    """One field's say on one size: ``value`` from its ``what`` (rows, columns, entries, a head's size)."""

    value: int | Fraction
    path: Path
    what: str
    rank: int  # ties go to the lowest rank: 0 the input (x, x_kv), 1 weights and heads, 2 biases and labels, 3 mask, w_o
    label: str = ""  # how it reads as evidence, when not "{what} of {field}"


#: How a claim's ``what`` reads as evidence.
_WHAT = {"rows": "shape.evidence.rows", "columns": "shape.evidence.columns", "entries": "shape.evidence.entries"}


class Sizes:
    """Every size of an exercise decided from the fields that agree on it, not from the first one read.

    Each field says what it implies (``w_k`` with 3 columns: d_k = 3); a size
    is the value most fields agree on, ties going to the input (``x``,
    ``x_kv``), then the weights, then the biases and labels, then the mask and
    ``w_o``, then the file order.  A field that disagrees is reported once, with the fields
    that agree named as the evidence, so one wrong field is one problem and
    the fields it disagrees with are not blamed for it.
    """

    def __init__(self, doc: Document):
        self.doc = doc
        self.one_head = False  # the per-head form with one head: heads[0].w_q reads w_q everywhere
        self.scale: dict[str, int] = {}  # fused widths are claimed per head (width / num_heads) and shown whole
        self.claims: dict[str, list[_Claim]] = {}
        self.decided: dict[str, int | None] = {}

    def claim(self, size: str, value: int | Fraction, path: Path, what: str, rank: int, label: str = "") -> None:
        """``path`` says ``size`` is ``value``; a field has one say per size (its first).

        An empty list says nothing (no size is 0): two empty label lists never outvote ``x``.
        """
        if value == 0:
            return
        claims = self.claims.setdefault(size, [])
        if all(c.path != path for c in claims):
            claims.append(_Claim(value, path, what, rank, label))

    def withdraw(self, size: str, path: Path) -> None:
        """Take back ``path``'s say on ``size`` and decide it again, when other fields say something."""
        claims = self.claims.get(size, [])
        if any(c.path != path for c in claims):
            self.claims[size] = [c for c in claims if c.path != path]
            self.decide(size)

    def per_head(self, size: str, width: int) -> int | Fraction:
        """What a width says of ``size``: itself, or for a fused width its share per head (not whole: it cannot win)."""
        scale = self.scale.get(size, 1)
        share = Fraction(width, scale)
        return int(share) if share.denominator == 1 else share

    def width(self, size: str) -> int | None:
        """The decided ``size`` as a field shows it: a fused width is num_heads times the per-head size."""
        value = self.decided.get(size)
        return None if value is None else value * self.scale.get(size, 1)

    def _order(self, c: _Claim) -> tuple[int, int, int]:
        line, col = self.doc.where(c.path)
        return (c.rank, line if line is not None else 1 << 30, col or 0)

    def decide(self, size: str) -> int | None:
        """The value most claims agree on (whole numbers only); ``None`` when nothing says."""
        claims = [c for c in self.claims.get(size, []) if isinstance(c.value, int)]
        if not claims:
            self.decided[size] = None
            return None
        votes = Counter(c.value for c in claims)
        best = max(votes.values())
        value = min((c for c in claims if votes[c.value] == best), key=self._order).value
        self.decided[size] = value  # type: ignore[assignment]
        return value  # type: ignore[return-value]

    def agree(self, size: str, value: int | None = None) -> list[_Claim]:
        value = self.decided.get(size) if value is None else value
        return sorted((c for c in self.claims.get(size, []) if c.value == value), key=self._order)

    def evidence(self, size: str, near: Path) -> str:
        """The fields that agree on ``size``, as read from the field at ``near``: ``columns of w_q and entries of b_q``."""
        groups: dict[str, list[str]] = {}  # "columns" -> ["w_q", "w_k"]: "columns of w_q and w_k"
        for c in self.agree(size):
            if c.path != near:
                groups.setdefault(c.label or t(_WHAT[c.what]), []).append("" if c.label else _near(c.path, near, self.one_head))
        return t("list.sep").join(what if names == [""] * len(names) else t("shape.evidence", what=what, fields=join_and(names))
                                  for what, names in groups.items())


def _near(path: Path, near: Path, one_head: bool = False) -> str:
    """``path`` as read from a field at ``near``: ``w_q`` in the same head (or when there is one), ``heads[0].w_q`` from another."""
    if path[:1] == ("heads",) and (path[:2] == near[:2] or one_head):
        return format_path(path[2:])
    return format_path(path)

