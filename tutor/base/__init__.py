"""What every layer shares, and nothing else: one exception type per failure
(``errors``), every sentence a learner reads, by key, in the language of the
run (``messages``; one catalogue module per language in ``catalogs``: ``en``,
``zh``), where a Chinese line may break and how its lines join (``cjk``),
answers typed with a Chinese input method read as ASCII (``halfwidth``), the
one environment object, the only reader of the process's environment
(``env``: the language too, from ``ATTN_TUTOR_LANG`` and the locale), every
decimal (``decimals``), text from a file or the store escaped before it
reaches a terminal (``textsafe``), widths in terminal cells, by which every
column is padded (``cells``), the ASCII fallback and the one test of a
UTF-8 stream (``ascii``), the one JSON writer (``jsontext``), the one way a
file the user named is written (``outfile``), and numpy imported on first
use (``lazy``).  It imports nothing of the package.

Modules: :mod:`.errors`, :mod:`.messages`, :mod:`.catalogs`, :mod:`.cjk`, :mod:`.halfwidth`, :mod:`.env`, :mod:`.decimals`, :mod:`.textsafe`, :mod:`.cells`, :mod:`.ascii`, :mod:`.jsontext`, :mod:`.outfile`, :mod:`.lazy`.
"""
