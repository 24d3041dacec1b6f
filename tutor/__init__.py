"""attn-tutor: hand-calculate multi-head self-attention exactly, step by step.

Layers (dependencies point downwards only)::

    cli                      the thin Typer layer (one module of commands per area)
    session, authoring       a practice session's loop; validate/new/handouts for instructors
    render, quiz, store      output (a Console passed in), the practice drill, progress
    attempt                  one answered step: what the drill emits and the store keeps
    check, verify, catalog   the errata auditor, engine agreement, where exercises come from
    diagnose, worked         the misconception catalogue, an entry worked out
    answers                  the safe parser for typed answers, and their grading
    exercise, yamlread       the schema, the checks and the one loader (YAML 1.2 typing, positions)
    exact, numeric           the exact engine and the NumPy mirror of PyTorch
    steps, exactnum          Step/Solution records and exact entries
    exercise.record, errors, messages  the validated exercise, error types, every sentence
"""

__version__ = "0.1.0"
