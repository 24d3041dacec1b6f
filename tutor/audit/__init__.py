"""The errata auditor: a written solution (a solution file) read as written,
every step judged by the one grading rule, the author's earlier values
carried forward so that only the first wrong step is blamed, the mistake
named, and the checks that need no recomputation (rows that sum to 1,
weights in [0, 1], masked entries).

Modules: :mod:`.solution`, :mod:`.tiled_part`, :mod:`.check`, :mod:`.plausibility`; a class's
submissions graded in one run, a row each (:mod:`.batch`), and their class view (:mod:`.classview`,
issue 24).
"""
