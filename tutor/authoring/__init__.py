"""For instructors: ``validate`` (every exercise file and pack checked, and
the mistakes an exercise cannot catch named), ``new`` (exercises whose
numbers are small enough for paper, in format v1 or v2, or fresh numbers of
a given shape), handout files, and a class's per-student variants
(``handouts --students``).

Modules: :mod:`.validate` (and the handouts, and the rows of ``list``, whose step counts come from
:mod:`.steplist` without the step catalogue); the generator, one core for v1 and v2: :mod:`.spec`
(the options), :mod:`.shape` (what is drawn), :mod:`.draw` (the drawing loop), :mod:`.draft` (what the file
states), :mod:`.write` (the writer), :mod:`.generate` (the entry points); :mod:`.variants` (a roster's
variants, each drawn by :mod:`.generate` from a seed of the student and the exercise).
"""
