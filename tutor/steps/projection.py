"""The projections: ``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V`` (one per head).

Vaswani et al. 2017, §3.2.2 (``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``),
in the row-vector convention of hand calculation.  ``X_kv`` is ``X`` in
self-attention; in cross-attention K and V come from the other sequence.
"""

from __future__ import annotations

from .. import exact
from ..exercise.record import Exercise, Head, Matrix, Vector
from ..messages import t
from .kind import Build, StepKind, always, dims, given_matrix
from .records import Operand, Solution, Step
from .worked import Worked, dot, entry_products, factor, total


def _parts(ex: Exercise, id: str, head: int | None) -> tuple[Matrix, str, tuple[str, ...], Matrix, Vector | None]:
    """``(x, its name, its row labels, W, b)`` of projection ``id`` of ``head``."""
    hd: Head = ex.heads[head or 0]
    w, b = {"q": (hd.w_q, hd.b_q), "k": (hd.w_k, hd.b_k), "v": (hd.w_v, hd.b_v)}[id]
    if id == "q":
        return ex.x, "X", ex.query_labels, w, b
    return ex.kv, "X_kv" if ex.is_cross else "X", ex.key_labels, w, b


def _kind(id: str) -> StepKind:
    sym = id.upper()

    def build(bd: Build, head: int | None) -> Step:
        x, src, rows, w, b = _parts(bd.ex, id, head)
        m = exact.project(x, w, b)  # [n, d_in]·[d_in, d] -> [n, d]
        bd.data[id, head] = m
        ops: tuple[Operand, ...] = (Operand(src, (len(x), len(x[0]))), Operand(f"W_{sym}", (len(w), len(w[0]))))
        formula = f"{sym} = {src}·W_{sym}"
        if b is not None:
            ops += (Operand(f"b_{sym}", (len(b),)),)
            formula += f" + b_{sym}"
        return Step(id, head, sym, formula, ops, "·", m.exact(), rows, dims("d", len(w[0])))

    def work(sol: Solution, step: Step, i: int, j: int) -> str:
        x, src, _, w, b = _parts(sol.exercise, id, step.head)
        rl, cl = step.row_labels[i], step.col_labels[j]
        pairs = [(factor(x[i][k], float(x[i][k])), factor(w[k][j], float(w[k][j]))) for k in range(len(w))]
        bias = f" + b_{sym}[{cl}]" if b is not None else ""
        bias_value = f" + {factor(b[j], float(b[j]))}" if b is not None else ""
        return f"{src}[{rl}, :]·W_{sym}[:, {cl}]{bias} = {dot(pairs)}{bias_value} {total(step.exact[i][j], step.value[i][j])}"

    def arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
        x, _, _, w, b = _parts(sol.exercise, id, step.head)

        def pairs_of(i: int, j: int) -> tuple[list[tuple[str, str]], str]:
            pairs = [(factor(x[i][k], float(x[i][k]), places), factor(w[k][j], float(w[k][j]), places))
                     for k in range(len(w))]
            return pairs, factor(b[j], float(b[j]), places) if b is not None else ""

        return entry_products(step, pairs_of, places)

    def given(sol: Solution, step: Step) -> tuple:
        x, src, rows, w, b = _parts(sol.exercise, id, step.head)
        out = [given_matrix(src, x, rows, dims("d", len(x[0]))),
               given_matrix(f"W_{sym}", w, dims("r", len(w)), dims("d", len(w[0])))]
        if b is not None:
            out.append(given_matrix(f"b_{sym}", (b,), ("",), dims("d", len(b))))
        return tuple(out)

    def why(step: Step, ex: Exercise) -> list[str]:
        cross = [t("step.k.why.cross")] if id != "q" and ex.is_cross else []
        return cross + [t(f"step.{id}.why")]

    return StepKind(
        id=id, scope="head", op="·", exists=always, inputs=lambda ex, head: (),
        build=build, varies=frozenset({"drop", "split_reshape"}), work=work, given=given, why=why, arithmetic=arithmetic,
    )


Q, K, V = _kind("q"), _kind("k"), _kind("v")
