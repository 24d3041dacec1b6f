"""The misconception catalogue and what it tells: each mistake a learner can
make is a variant of the step walks (a knob of ``steps.Variant``) or a
judge of an answer's signature; the matcher names the mistake a wrong
matrix shows, and ``invisible`` decides exactly which mistakes an exercise
cannot catch.

Modules: :mod:`.diagnose`, :mod:`.invisible`.
"""
