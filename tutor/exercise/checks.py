"""The checks across fields: the two forms, the shapes that must chain, and the limits.

:func:`check_fields` runs on the fields :class:`.schema.ExerciseFile`
validated -- or, for an invalid file, on the part of it that is valid
(:func:`.load.partial`), so one run reports every mistake, each once -- and
builds the :class:`.record.Exercise` when nothing is wrong.  Sizes are
decided by the fields that agree on them (:class:`.sizes.Sizes`); a weight
in ``nn.Linear``'s ``[out, in]`` layout is named as transposed.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from tutor.base.errors import Problem
from tutor.base.messages import LANGUAGES, join_and, t
from tutor.exercise.yamlread import Document, Path, format_path

from . import record
from .schema import MAX_DENOMINATOR, MAX_DENOMINATOR_DIGITS
from .sizes import Sizes

#: The largest value of each size an exercise may have: small enough for paper, and for the exact engine.
LIMITS = {"L": 16, "L_k": 16, "d_model": 32, "d_kv": 32, "d_k": 32, "d_v": 32, "d_out": 32, "heads": 8}


def _hint(key: str, **fields: Any) -> str:
    """The fix hint for message ``key`` (its ``.hint`` sentence), or ``""``."""
    try:
        return t(key + ".hint", **fields)
    except KeyError:
        return ""


def _split(m: list[list[Fraction]], h: int, n: int) -> record.Matrix:
    """Columns ``h*n:(h+1)*n`` of ``m``."""
    return tuple(tuple(row[h * n:(h + 1) * n]) for row in m)


def _cols(m: list[list[Fraction]]) -> int:
    return len(m[0])


def _flags(values: list[bool]) -> str:
    """``[false, false, true]``: booleans as the file writes them."""
    return "[" + ", ".join("true" if v else "false" for v in values) + "]"


def _key_padding(c: _Checker, f: Any) -> None:
    """``key_padding`` (True = a real key) and ``key_padding_mask`` (PyTorch's polarity, True = padding).

    Both are read.  ``key_padding`` gets a note (a warning) recommending
    ``key_padding_mask``, whose polarity is the one ``nn.MultiheadAttention``
    takes; both at once must say the same about every key, else it is an
    error at the first key they disagree on.
    """
    old, new = f.key_padding, f.key_padding_mask
    reported = {p.field.split("[")[0] for p in c.problems}
    if old is None or ("key_padding",) in c.bad or reported & {"key_padding", "key_padding_mask"}:
        return  # a field already reported wrong gets no note on top
    if new is not None and ("key_padding_mask",) not in c.bad and len(new) == len(old):
        clash = next((j for j, (real, pad) in enumerate(zip(old, new, strict=True)) if real == pad), None)
        if clash is not None:
            c.add(("key_padding_mask", clash), "key_padding.disagree", old=_flags([old[clash]]).strip("[]"),
                  new=_flags([new[clash]]).strip("[]"))
            return
        c.doc.warnings.append(c.doc.problem(("key_padding",), t("key_padding.both"), t("key_padding.both.hint")))
        return
    if new is None:
        c.doc.warnings.append(c.doc.problem(("key_padding",), t("key_padding.old"),
                                            t("key_padding.old.hint", flags=_flags([not real for real in old]))))


def _real_keys(f: Any) -> tuple[bool, ...] | None:
    """The exercise's key padding as the record keeps it: True = a real key."""
    if f.key_padding is not None:
        return tuple(f.key_padding)
    if f.key_padding_mask is not None:
        return tuple(not pad for pad in f.key_padding_mask)
    return None


class _Checker:
    """Cross-field checks; every problem is recorded, the first per chain stops that chain.

    ``bad`` holds the paths of fields already reported invalid (or missing):
    checks that need them are skipped, so one mistake is reported once.
    """

    def __init__(self, doc: Document, bad: set[Path]):
        self.doc, self.bad = doc, bad
        self.problems: list[Problem] = []

    def val(self, path: Path, value: Any) -> Any:
        """``value``, or ``None`` when the field at ``path`` is known to be invalid."""
        return None if path in self.bad else value

    def add(self, path: Path, key: str, **fields: Any) -> None:
        self.problems.append(self.doc.problem(path, t(key, **fields), _hint(key, **fields)))

    def ragged(self, path: Path, m: list[list[Any]] | None) -> None:
        """Report the first row whose length differs from row 1's; the matrix is then invalid."""
        if m is None or path in self.bad:
            return
        for r, row in enumerate(m[1:], start=1):
            if len(row) != len(m[0]):
                self.add(path + (r,), "shape.ragged", row=r + 1, found=len(row), expected=len(m[0]))
                self.bad.add(path)
                return

    def denominators(self, path: Path, values: list[Any] | None) -> None:
        """Report the first entry at which the common denominator of ``values`` (a matrix or a
        vector) passes :data:`MAX_DENOMINATOR`; the field is then invalid."""
        if values is None or path in self.bad:
            return
        rows = values if values and isinstance(values[0], list) else [values]
        common = 1
        for r, row in enumerate(rows):
            for col, q in enumerate(row):
                common = math.lcm(common, q.denominator)
                if common > MAX_DENOMINATOR:
                    at = path + ((r, col) if rows is values else (col,))
                    self.add(at, "limit.denominator", field=path[-1], digits=len(str(common)),
                             limit=MAX_DENOMINATOR_DIGITS)
                    self.bad.add(path)
                    return

    def limit(self, path: Path, what: str, found: int | None) -> None:
        if found is not None and found > LIMITS[what]:
            self.add(path, "limit", what=what, found=found, limit=LIMITS[what])


def check_fields(f: Any, doc: Document, bad: set[Path] | None = None) -> tuple[list[Problem], record.Exercise | None]:
    """Forms, shapes that must chain, and limits, on the fields of ``f`` that are valid.

    ``f`` is an :class:`ExerciseFile`, or the valid part of an invalid file
    (:func:`.load.partial`) with the invalid fields' paths in ``bad``.  The
    exercise is built only when every field is valid and nothing is found.
    """
    c = _Checker(doc, set(bad or ()))
    for lang in getattr(f, "translations", None) or {}:
        if lang not in LANGUAGES or lang == "en":
            c.add(("translations", lang), "schema.translation.language", lang=lang, languages=", ".join(LANGUAGES))
    for name in ("x", "x_kv", "w_q", "w_k", "w_v", "w_o", "upstream"):
        c.ragged((name,), getattr(f, name))
    if isinstance(f.mask, list):
        c.ragged(("mask",), f.mask)
    for i, h in enumerate(f.heads or []):
        for name in ("w_q", "w_k", "w_v"):
            if h is not None:
                c.ragged(("heads", i, name), getattr(h, name))
    for name in ("x", "x_kv", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "w_o", "b_o", "upstream"):
        c.denominators((name,), getattr(f, name))
    for i, h in enumerate(f.heads or []):
        for name in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v"):
            if h is not None:
                c.denominators(("heads", i, name), getattr(h, name))

    x = c.val(("x",), f.x)
    x_kv = c.val(("x_kv",), f.x_kv)
    cross = f.x_kv is not None or ("x_kv",) in c.bad
    LK, KV = ("L_k", "d_kv") if cross else ("L", "d_model")  # self-attention: the keys are the queries
    shown = {"L": "L", "L_k": "L_k", "d_model": "d_model", "d_kv": "d_kv", "wk": "num_heads·d_k", "wv": "num_heads·d_v",
             "d_k": "d_k", "d_v": "d_v", "d_out": "d_out"}
    s = Sizes(doc)

    # --- the sequences and their labels
    if x is not None:
        s.claim("L", len(x), ("x",), "rows", 0)
        s.claim("d_model", _cols(x), ("x",), "columns", 0)
        c.limit(("x",), "L", len(x))
        c.limit(("x",), "d_model", _cols(x))
    if x_kv is not None:
        s.claim("L_k", len(x_kv), ("x_kv",), "rows", 0)
        s.claim("d_kv", _cols(x_kv), ("x_kv",), "columns", 0)
        c.limit(("x_kv",), "L_k", len(x_kv))
        c.limit(("x_kv",), "d_kv", _cols(x_kv))
    if f.tokens is not None:
        s.claim("L", len(f.tokens), ("tokens",), "entries", 2)
    if f.kv_tokens is not None and not cross:
        c.add(("kv_tokens",), "form.kv_tokens")
    elif f.kv_tokens is not None:
        s.claim("L_k", len(f.kv_tokens), ("kv_tokens",), "entries", 2)
    for name in ("key_padding", "key_padding_mask"):
        if getattr(f, name) is not None:
            s.claim(LK, len(getattr(f, name)), (name,), "entries", 2)
    mask = c.val(("mask",), f.mask)
    if isinstance(mask, list):
        s.claim("L", len(mask), ("mask",), "rows", 3)
        if mask:
            s.claim(LK, len(mask[0]), ("mask",), "columns", 3)

    # --- the form, and the weights each form has: (field, matrix, size of its rows, size of its columns)
    fused_fields = [n for n in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v") if getattr(f, n) is not None or (n,) in c.bad]
    heads_given = f.heads is not None or ("heads",) in c.bad
    num_heads_given = f.num_heads is not None or ("num_heads",) in c.bad
    weights: list[tuple[Path, list[list[Fraction]], str, str]] = []
    biases: list[tuple[Path, list[Fraction], str]] = []
    per_head = fused = False
    H = 0
    if heads_given and (fused_fields or f.heads is not None and f.num_heads is not None and f.num_heads != len(f.heads)):
        c.add(("heads",), "form.both")
    elif f.heads is not None:
        per_head, H = True, len(f.heads)
        s.one_head = H == 1
        for i, h in enumerate(f.heads):
            if h is None:
                continue
            p: Path = ("heads", i)
            for name, rows, cols in (("w_q", "d_model", "d_k"), ("w_k", KV, "d_k"), ("w_v", KV, "d_v")):
                m = c.val(p + (name,), getattr(h, name))
                if m is not None:
                    weights.append((p + (name,), m, rows, cols))
            for name, size in (("b_q", "d_k"), ("b_k", "d_k"), ("b_v", "d_v")):
                if getattr(h, name) is not None:
                    biases.append((p + (name,), getattr(h, name), size))
    elif f.num_heads is not None:
        H = f.num_heads
        for n in ("w_q", "w_k", "w_v"):
            if getattr(f, n) is None and (n,) not in c.bad:
                c.add((), "form.fused_missing", field=n)
        c.limit(("num_heads",), "heads", H)
        if H <= LIMITS["heads"]:
            fused = True
            for name, rows, cols in (("w_q", "d_model", "wk"), ("w_k", KV, "wk"), ("w_v", KV, "wv")):
                m = c.val((name,), getattr(f, name))
                if m is not None:
                    weights.append(((name,), m, rows, cols))
            for name, size in (("b_q", "wk"), ("b_k", "wk"), ("b_v", "wv")):
                if getattr(f, name) is not None:
                    biases.append(((name,), getattr(f, name), size))
            s.scale = {"wk": H, "wv": H}
    elif num_heads_given or heads_given:
        pass  # num_heads or heads is invalid (reported): the form cannot be told
    elif fused_fields:
        c.add((fused_fields[0],), "form.needs_fused", field=fused_fields[0])
    else:
        c.add((), "form.neither")
    if f.heads is not None:
        c.limit(("heads",), "heads", len(f.heads))

    # --- the input sizes: from x, x_kv, the labels, the mask and the rows of the weights
    for path, m, rows, _ in weights:
        s.claim(rows, len(m), path, "rows", 1)
    for size in ("L", "L_k", "d_model", "d_kv"):
        s.decide(size)
    for name, m, rows, cols in (("x", x, "L", "d_model"), ("x_kv", x_kv, "L_k", "d_kv")):
        if m is None:
            continue
        others_r = {cl.value for cl in s.claims.get(rows, []) if cl.path != (name,)}
        others_c = {cl.value for cl in s.claims.get(cols, []) if cl.path != (name,)}
        if len(m) != _cols(m) and others_r == {_cols(m)} and others_c == {len(m)}:  # every other field reads it transposed
            s.withdraw(rows, (name,))
            s.withdraw(cols, (name,))
        # a sequence outvoted on one of its sizes says nothing about the other (as a weight with wrong rows)
        elif s.decided[cols] != _cols(m) and s.decided[rows] == len(m):
            s.withdraw(rows, (name,))
        elif s.decided[rows] != len(m) and s.decided[cols] == _cols(m):
            s.withdraw(cols, (name,))

    # --- each weight's layout from its rows; then d_k and d_v from the weights laid out right and the biases
    layout: dict[Path, str] = {}
    for path, m, rows, cols in weights:
        want = s.decided[rows]
        if want is None or len(m) == want:
            layout[path] = "ok"
            s.claim(cols, s.per_head(cols, _cols(m)), path, "columns", 1)
        elif _cols(m) == want and len(m) != want:
            layout[path] = "transposed?"  # [d_k × d_model] for [d_model × d_k]: nn.Linear's layout
        else:
            layout[path] = "rows"  # its columns say nothing: its layout is not the one the format asks for
    for path, v, size in biases:
        s.claim(size, s.per_head(size, len(v)), path, "entries", 2)
    w_o = c.val(("w_o",), f.w_o)
    if w_o is not None and fused:
        s.claim("wv", s.per_head("wv", len(w_o)), ("w_o",), "rows", 3)
    elif w_o is not None and per_head and H:  # every head has the same d_v, so w_o has num_heads·d_v rows
        per = Fraction(len(w_o), H)
        s.claim("d_v", int(per) if per.denominator == 1 else per, ("w_o",), "rows", 3,
                label=t("shape.w_o_evidence", rows=len(w_o), heads=H) if H > 1 else "")
    for size in ("d_k", "d_v", "wk", "wv"):
        if not s.claims.get(size):  # only transposed weights say: their rows
            for path, m, _, cols in weights:
                if cols == size and layout[path] == "transposed?" and isinstance(s.per_head(size, len(m)), int):
                    s.claim(size, s.per_head(size, len(m)), path, "rows", 1)
        s.decide(size)
    for path, m, _, cols in weights:
        if layout[path] == "transposed?":  # its transpose must fit the others (and split into whole heads)
            fits = s.width(cols) == len(m) or s.width(cols) is None and isinstance(s.per_head(cols, len(m)), int)
            layout[path] = "transposed" if fits else "rows"
    if per_head:
        width_v = H * s.decided["d_v"] if s.decided["d_v"] is not None else None
    else:
        width_v = s.width("wv")

    # --- the output projection
    wo_layout = "ok"
    if w_o is not None:
        d_out_from = _cols(w_o)
        if width_v is not None and len(w_o) != width_v:
            # out_proj.weight of nn.Linear is [d_out × num_heads·d_v]: d_out as b_o says, else usually d_model
            pinned = {len(f.b_o)} if f.b_o is not None else {s.decided["d_model"]}
            if _cols(w_o) == width_v and len(w_o) in pinned:
                wo_layout, d_out_from = "transposed", len(w_o)
            else:
                wo_layout = "rows"
        s.claim("d_out", d_out_from, ("w_o",), "columns" if wo_layout != "transposed" else "rows", 1)
        c.limit(("w_o",), "d_out", d_out_from)
    if f.b_o is not None:
        if f.w_o is None and ("w_o",) not in c.bad:
            c.add(("b_o",), "form.b_o_alone")
        elif w_o is not None:
            s.claim("d_out", len(f.b_o), ("b_o",), "entries", 2)
    s.decide("d_out")

    # --- every field that disagrees with what the others agree on, once
    def disagrees(path: Path, found: int, what: str, size: str, name: str = "") -> None:
        evidence = s.evidence(size, path)
        name = name or shown[size]
        expected_what = t("shape.expected_what", name=name, evidence=evidence) if evidence else name
        key = {"rows": "shape.rows.dim", "columns": "shape.cols", "entries": "shape.len"}[what]
        c.add(path, key, field=path[-1], found=found, expected_what=expected_what, expected=s.width(size))

    for name, rows, cols in (("x", "L", "d_model"), ("x_kv", "L_k", "d_kv")):
        m = x if name == "x" else x_kv
        R, C = s.decided[rows], s.decided[cols]
        if m is not None and len(m) != R and _cols(m) != C and (len(m), _cols(m)) == (C, R):
            c.problems.append(doc.problem((name,), t("shape.transposed", field=name, rows=len(m), cols=_cols(m),
                                                     row_size=rows, col_size=cols), t("shape.transposed.x.hint")))
        elif m is not None and len(m) != R and _cols(m) != C and R is not None and C is not None:
            c.add((name,), "shape.both", field=name, rows=len(m), cols=_cols(m), row_size=rows, col_size=cols, R=R, C=C,
                  row_evidence=s.evidence(rows, (name,)), col_evidence=s.evidence(cols, (name,)))
        elif m is not None and len(m) != s.decided[rows]:
            disagrees((name,), len(m), "rows", rows)
        elif m is not None and _cols(m) != s.decided[cols]:
            outvoting = [w for w in weights if w[2] == cols and len(w[1]) == s.decided[cols]]
            if outvoting and all(_cols(w[1]) == _cols(m) for w in outvoting):  # or are they nn.Linear's [out, in]?
                c.problems.append(doc.problem((name,), t("shape.cols", field=name, found=_cols(m), expected=C,
                                                         expected_what=t("shape.expected_what", name=cols, evidence=s.evidence(cols, (name,)))),
                                              t("shape.cols.or_transposed.hint", field=name, expected=C,
                                                weights=join_and([format_path(w[0][-1:]) for w in outvoting]))))
            else:
                disagrees((name,), _cols(m), "columns", cols)
    for name, size in (("tokens", "L"), ("kv_tokens", "L_k"), ("key_padding", LK), ("key_padding_mask", LK)):
        v = getattr(f, name)
        if v is not None and (name != "kv_tokens" or cross) and len(v) != s.decided[size]:
            disagrees((name,), len(v), "entries", size, "L_k" if name.startswith("key_padding") else "")
    _key_padding(c, f)
    L, L_k = s.decided["L"], s.decided[LK]
    if isinstance(mask, list) and L is not None and L_k is not None and (len(mask) != L or any(len(r) != L_k for r in mask)):
        c.add(("mask",), "shape.mask", found=f"[{len(mask)} × {len(mask[0]) if mask else 0}]", L=L, L_k=L_k)
    done: set[Path] = set()  # fields already reported with their head
    for i in range(H if per_head and H > 1 else 0):
        for size in ("d_k", "d_v"):  # a head that agrees with itself on another size: one report, at the head
            mine = [cl for cl in s.claims.get(size, []) if cl.path[:2] == ("heads", i)]
            others = [cl for cl in s.agree(size) if cl.path[:2] != ("heads", i)]
            values = {cl.value for cl in mine}
            if len(values) == 1 and s.decided[size] not in values and others:
                heads_agreeing = list(dict.fromkeys(t("shape.evidence.head", head=int(cl.path[1]) + 1) for cl in others
                                                    if cl.path[0] == "heads"))
                c.add(("heads", i), "shape.head_dims", what=size, found=mine[0].value, expected=s.decided[size],
                      others=join_and(heads_agreeing + [cl.label for cl in others if cl.path[0] != "heads"]))
                done.update(cl.path for cl in mine)
                break
    for path, m, rows, cols in weights:
        R, C = s.decided[rows], s.width(cols)
        if path in done:
            continue
        if layout[path] == "transposed":
            c.add(path, "shape.transposed", field=path[-1], rows=len(m), cols=_cols(m), row_size=shown[rows],
                  col_size=shown[cols])
        elif layout[path] == "rows" and C is not None and _cols(m) != C:
            c.add(path, "shape.both", field=path[-1], rows=len(m), cols=_cols(m), row_size=shown[rows],
                  col_size=shown[cols], R=R, C=C, row_evidence=s.evidence(rows, path), col_evidence=s.evidence(cols, path))
        elif layout[path] == "rows":
            source = next((cl for cl in s.agree(rows) if cl.path in (("x",), ("x_kv",))), None)
            if source is not None:
                c.add(path, "shape.rows", field=path[-1], found=len(m), other=source.path[0], expected=R, name=shown[rows])
            else:
                disagrees(path, len(m), "rows", rows)
        elif C is not None and _cols(m) != C:
            disagrees(path, _cols(m), "columns", cols)
    for path, v, size in biases:
        if path not in done and s.width(size) is not None and len(v) != s.width(size):
            disagrees(path, len(v), "entries", size)
    if per_head:
        for size in ("d_k", "d_v"):
            agreeing = s.agree(size)
            if agreeing and agreeing[0].value > LIMITS[size]:
                c.limit(agreeing[0].path, size, agreeing[0].value)  # type: ignore[arg-type]
    if fused:
        for size, what in (("wk", "d_k"), ("wv", "d_v")):
            claims = s.claims.get(size, [])
            if s.decided.get(size) is not None:
                c.limit(("w_q",) if size == "wk" else ("w_v",), what, s.decided[size])
            elif claims:  # no field's width is a multiple of num_heads
                first = next((cl for cl in sorted(claims, key=s._order) if cl.path[0] in ("w_q", "w_k", "w_v")), claims[0])
                width = int(first.value * H)
                c.add(first.path, "shape.divisible", field=first.path[-1], found=width, heads=H)
    if w_o is not None and wo_layout == "transposed":
        c.add(("w_o",), "shape.transposed", field="w_o", rows=len(w_o), cols=_cols(w_o), row_size=shown["wv"],
              col_size="d_out")
    elif w_o is not None and wo_layout == "rows":
        c.add(("w_o",), "shape.w_o_rows", found=len(w_o), expected=width_v)
    if f.b_o is not None and w_o is not None and s.decided["d_out"] is not None and len(f.b_o) != s.decided["d_out"]:
        disagrees(("b_o",), len(f.b_o), "entries", "d_out")
    if f.w_o is None and ("w_o",) not in c.bad and width_v is not None:
        c.limit(("heads",) if per_head else ("w_v",), "d_out", width_v)

    if c.problems or c.bad or x is None or not (per_head or fused):
        return c.problems, None
    L, L_k = len(x), len(x_kv) if x_kv is not None else len(x)
    if per_head:
        def matrix(m: list[list[Fraction]]) -> record.Matrix:
            return tuple(tuple(row) for row in m)

        def vector(b: list[Fraction] | None) -> record.Vector | None:
            return tuple(b) if b is not None else None
        heads = [record.Head(matrix(h.w_q), matrix(h.w_k), matrix(h.w_v), vector(h.b_q), vector(h.b_k), vector(h.b_v))
                 for h in f.heads]
    else:
        d_k, d_v = _cols(f.w_q) // H, _cols(f.w_v) // H

        def bias(b: list[Fraction] | None, h: int, n: int) -> record.Vector | None:
            return tuple(b[h * n:(h + 1) * n]) if b is not None else None
        heads = [record.Head(_split(f.w_q, h, d_k), _split(f.w_k, h, d_k), _split(f.w_v, h, d_v),
                            bias(f.b_q, h, d_k), bias(f.b_k, h, d_k), bias(f.b_v, h, d_v)) for h in range(H)]
    # --- the backward pass's upstream gradient (issue 13): [L × d_out]
    upstream = c.val(("upstream",), f.upstream)
    if upstream is not None:
        d_out = _cols(w_o) if w_o is not None else sum(hd.d_v for hd in heads)
        if (len(upstream), _cols(upstream)) != (L, d_out):
            c.add(("upstream",), "shape.upstream", found=f"[{len(upstream)} × {_cols(upstream)}]", L=L, d_out=d_out)
            return c.problems, None
    mask_kind: record.MaskKind = "none"
    mask_m: record.BoolMatrix | None = None
    if f.mask == "causal":
        mask_kind, mask_m = "causal", record.causal(L, L_k)
    elif isinstance(f.mask, list):
        mask_kind, mask_m = "matrix", tuple(tuple(r) for r in f.mask)
    ex = record.Exercise(
        id=f.id, title=f.title, description=f.description,
        translations=tuple((lang, w.title, w.description) for lang, w in f.translations.items()),
        x=tuple(map(tuple, x)), x_kv=tuple(map(tuple, x_kv)) if x_kv is not None else None,
        tokens=tuple(f.tokens) if f.tokens else None, kv_tokens=tuple(f.kv_tokens) if f.kv_tokens else None,
        heads=tuple(heads), w_o=tuple(map(tuple, w_o)) if w_o is not None else None,
        b_o=tuple(f.b_o) if f.b_o is not None else None, mask_kind=mask_kind, mask=mask_m,
        key_padding=_real_keys(f), upstream=tuple(map(tuple, upstream)) if upstream is not None else None,
        fused=f.num_heads is not None and f.heads is None, tags=tuple(f.tags), difficulty=f.difficulty,
        source=doc.filename,
    )
    return [], ex
