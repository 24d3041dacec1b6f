"""The sentences of ``attn-tutor code`` (the katas), merged into :data:`tutor.base.messages.EN`.

Kept apart only to keep one catalogue file small enough to read; the keys
start with ``code.``.  ``code.mistake.<key>`` says what a learner's code did
and what to change, in their terms (a line of code where it helps).
"""

from __future__ import annotations

EN_CODE: dict[str, str] = {
    # --- commands -------------------------------------------------------------------
    "code.no_such_kata": "no kata '{kata}' (the katas: {katas})",
    # --- mha -------------------------------------------------------------------------
    # --- sdpa, masks, cross ------------------------------------------------------------
    # --- gqa, kv-cache ------------------------------------------------------------------
    # --- flash, backward ----------------------------------------------------------------
}
