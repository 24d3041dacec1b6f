"""For instructors: ``validate`` (every exercise file and pack checked, and
the mistakes an exercise cannot catch named), ``new`` (exercises whose
numbers are small enough for paper, in format v1 or v2, or fresh numbers of
a given shape), and handout files.

Modules: :mod:`.validate`, :mod:`.generate`, :mod:`.generate_v2`.
"""
