"""FlashAttention's online softmax as a learner reads it: text for a console, and a JSON document."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from ..base.ascii import asciify, is_utf
from ..base.messages import Text as Words
from ..base.messages import t
from ..base.textsafe import shown
from ..exact.numbers import Exact, NegInf
from ..exercise.record import Exercise
from ..flash.walk import TiledRow
from .rich import RichRenderer
from .text import decimal, is_plain, pretty


def _q(e: Exact) -> dict[str, Any]:
    v = e.value()
    return {"exact": str(e), "value": None if v == float("-inf") else v}


def tiled_document(ex: Exercise, rows: list[TiledRow]) -> dict[str, Any]:
    """The contract's ``tiled`` list (one item per (head, query row); heads and key indices 0-based),
    each quantity with ``exact`` (answer grammar) and ``value`` (float; ``null`` for ``-inf``)."""
    items = []
    for r in rows:
        blocks = []
        for b in r.blocks:
            item: dict[str, Any] = {"keys": list(b.keys), "key_labels": [ex.key_labels[j] for j in b.keys],
                                    "scores": [_q(s) for s in b.scores], "m": _q(b.m)}
            if b.alpha is not None:
                item["alpha"] = _q(b.alpha)
            item["l"] = _q(b.l)
            item["acc"] = [_q(a) for a in b.acc]
            blocks.append(item)
        items.append({"head": r.head, "row": r.row, "query": ex.query_labels[r.row], "blocks": blocks,
                      "o": [_q(x) for x in r.o],
                      "lse": _q(r.lse),
                      "equals_plain_softmax": r.equal})
    return {"exercise": {"id": ex.id, "title": ex.local_title}, "block_size": rows[0].block_size if rows else None,
            "tiled": items}


class TiledRenderer:
    """Prints each query row's blocks: the running max, the rescale factor, the running sum, the accumulator."""

    def __init__(self, console: Console, precision: int = 4):
        self.console = console
        self.places = precision
        self.unicode = is_utf(console.encoding)

    def tx(self, text: Words) -> str:
        text = shown(str(text), keep="\n")
        return text if self.unicode else asciify(text)

    def line(self, text: Words, style: str = "", indent: int = 0) -> None:
        self.console.print(Padding(Text(self.tx(text), style=style, overflow="fold"), (0, 0, 0, indent), expand=False))

    def num(self, e: Exact) -> str:
        """``2√2``, ``1 + exp(−√2) ≈ 1.2431``: the exact form, and its decimal when it says more."""
        exact = str(e)
        if is_plain(exact):
            return pretty(exact)
        return f"{pretty(exact)} ≈ {decimal(e.value(), self.places)}"

    def vec(self, es: tuple[Exact, ...]) -> str:
        return "[" + ", ".join(self.num(e) for e in es) + "]"

    def render(self, ex: Exercise, rows: list[TiledRow]) -> None:
        # a title too long for the width goes on its own line(s) above a plain rule, as explain's titles
        RichRenderer(self.console, self.places).rule(t("tiled.title", title=ex.local_title, block=rows[0].block_size))
        for key in ("tiled.formula.m", "tiled.formula.alpha", "tiled.formula.l", "tiled.formula.acc", "tiled.formula.end"):
            self.line(t(key), indent=2)
        self.line(t("tiled.why"), "dim", 2)
        for r in rows:
            self.console.print()
            q = ex.query_labels[r.row]
            head = t("tiled.row.head", head=r.head + 1) if ex.num_heads > 1 else ""
            self.line(t("tiled.row.biased" if ex.has_bias else "tiled.row", query=q, head=head, shape=f"[1×{ex.heads[r.head].d_k}]", L_k=ex.L_k,
                        blocks=len(r.blocks)), "bold")
            for n, b in enumerate(r.blocks, start=1):
                labels = t("list.sep").join(ex.key_labels[j] for j in b.keys)  # a list in prose: 、 in Chinese
                scores = ", ".join(self.num(s) for s in b.scores)
                self.line(t("tiled.block", n=n, keys=labels, scores=scores), indent=2)
                if b.alpha is not None and str(b.m) == "-inf":  # exp(−∞ − (−∞)) is no number: nothing to rescale
                    self.line(t("tiled.alpha.unseen"), indent=4)
                elif b.alpha is not None:
                    self.line(f"alpha = exp(m_old − m) = {self.num(b.alpha)}", indent=4)
                self.line(f"m = {self.num(b.m)}", indent=4)
                self.line(f"l = {self.num(b.l)}", indent=4)
                self.line(f"acc = {self.vec(b.acc)}", indent=4)
            if isinstance(r.lse, NegInf):  # the row may attend to no key: l = 0, and 0/0 is set to 0
                self.line(t("tiled.empty", query=q, o=self.vec(r.o)), indent=2)
                continue
            self.line(f"o = acc / l = {self.vec(r.o)}", indent=2)
            self.line(f"lse = m + log(l) = {pretty(str(r.lse))} ≈ {decimal(r.lse.value(), self.places)}", indent=2)
            self.line(t("tiled.equal" if r.equal else "tiled.not_equal", query=q), "dim", 2)
