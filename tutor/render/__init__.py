"""Everything a learner reads, rendered: the worked solution for a terminal
(rich), as Markdown, JSON, HTML (printed to PDF by headless Chromium) and
SVG; the practice drill's and the
drills' views; check reports, stats and the exercise list.  Renderers take
a console (or return text); they compute nothing.

What a worked solution shows, and in what order, is decided once (:mod:`.outline`); the terminal
and its SVG picture (:mod:`.rich`, :mod:`.html`), the HTML page (:mod:`.page`, its MathML by :mod:`.mathml`,
its PDF by :mod:`.pdf`), Markdown (:mod:`.markdown`) and JSON (:mod:`.json`) render it.
"""

from ..base.env import MAX_WIDTH, MIN_WIDTH  # the widths every console is clamped to, read with the Env

__all__ = ["MAX_WIDTH", "MIN_WIDTH"]
