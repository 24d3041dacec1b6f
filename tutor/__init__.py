"""attn-tutor: hand-calculate multi-head self-attention exactly, step by step.

The packages are the layers, the command line (:mod:`tutor.cli`) on top and
:mod:`tutor.base` at the bottom; each imports only the ones below it.  The
one description of them, and of how to add a step, is docs/architecture.md
(a test holds its layer table against the code).
"""

__version__ = "0.1.0"
