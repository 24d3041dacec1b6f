"""The message catalogues, one module per language: :mod:`.en` (the reference) and :mod:`.zh`.

Each defines ``CATALOG``: every key of the English one, with the same
``{fields}``; :mod:`tutor.base.messages` imports a language's module the first
time the language is spoken.
"""
