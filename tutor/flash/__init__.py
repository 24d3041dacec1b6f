"""FlashAttention's online softmax: one query row's keys walked in blocks,
exactly and in floats under its mistakes (``walk``), a solution file's
``tiled:`` part judged block by block (``check``), and its practice drill, a
client of the practice machine that supplies its quantities and the
diagnosis of its mistakes (``drill``, ``session``).

Modules: :mod:`.walk`, :mod:`.check`, :mod:`.drill`, :mod:`.session`.
"""
