"""attn-tutor: hand-calculate multi-head self-attention exactly, step by step.

Layers (dependencies point downwards only)::

    cli            thin Typer layer
    render, quiz, store, exercise (schema + YAML loader)
    answers, diagnose
    steps          Step / Solution records
    exact, numeric the sympy engine and the NumPy mirror of PyTorch
    model, errors, messages
"""

__version__ = "0.1.0"
