"""Everything a learner reads, rendered: the worked solution for a terminal
(rich), as Markdown, JSON, HTML and SVG; the practice drill's and the
drills' views; check reports, stats and the exercise list.  Renderers take
a console (or return text); they compute nothing.

What a worked solution shows, and in what order, is decided once (:mod:`.outline`); the terminal
and HTML (:mod:`.rich`, :mod:`.html`), Markdown (:mod:`.markdown`) and JSON (:mod:`.json`) render it.
"""

#: The narrowest width any console is laid out at (``COLUMNS=0`` or a tiny terminal is
#: clamped to it): the layouts are made and tested for it.  Here, not in ``console.py``,
#: so the CLI can clamp ``COLUMNS`` without importing rich.
MIN_WIDTH = 20
#: The widest: a larger ``COLUMNS`` (or terminal) is clamped to it.  Some lines are as wide as the
#: console (rules, padded cells), so ``COLUMNS=1000000`` wrote 23 MB and ``COLUMNS=99999999`` ran
#: for minutes; 500 columns is wider than any terminal on a large screen.
MAX_WIDTH = 500
