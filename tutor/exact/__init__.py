"""Exact numbers and the exact engine, forward and backward: rationals, surds,
``-inf`` and structured softmax mixes (``numbers``), exponential polynomials
with a decidable equality (``expoly``) and matrices of them (``matrices``),
the gradient entries (``grad``), and one pure function per step of the
forward pass (``engine``) and of the backward pass (``backward``).  No numpy,
no sympy, no I/O.

Modules: :mod:`.numbers`, :mod:`.expoly`, :mod:`.matrices`, :mod:`.grad`, :mod:`.engine`, :mod:`.backward`.
"""
