"""Renderers: each takes a :class:`tutor.steps.Solution` and a Console, or returns text."""
