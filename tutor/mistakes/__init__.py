"""The misconception catalogue and what it tells: each mistake a learner can
make is a variant of the step walks (a knob of ``steps.Variant``) or a
judge of an answer's signature; the matcher names the mistake a wrong
matrix shows, and ``invisible`` decides exactly which mistakes an exercise
cannot catch.

Modules: :mod:`.diagnose`, :mod:`.invisible`.
"""

#: What joins the keys of the mistakes one answer cannot tell apart into the key of their group, recorded and
#: counted as one mistake (``scale_sqrt_d_model+scale_d_k+scale_constant``:
#: :func:`tutor.mistakes.diagnose.group_key`); a misconception's key holds none.  Here, not in ``diagnose``,
#: so that naming a recorded key (``stats``) loads no catalogue.
GROUP_SEP = "+"
