"""Renderers: each takes a :class:`tutor.steps.Solution` and a Console, or returns text."""

#: The narrowest width any console is laid out at (``COLUMNS=0`` or a tiny terminal is
#: clamped to it): the layouts are made and tested for it.  Here, not in ``console.py``,
#: so the CLI can clamp ``COLUMNS`` without importing rich.
MIN_WIDTH = 20
