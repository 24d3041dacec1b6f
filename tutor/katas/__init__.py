"""The code katas: a learner writes a piece of attention (the seed's
multi-head module, SDPA, the masks, cross-attention, grouped K/V heads, a
KV-cache decode step, the online softmax, the backward pass, RoPE and its
rotated key cache) in NumPy or in PyTorch; ``code check`` runs their file in a child process with limits (the
one place the tool runs code), compares what it returns with the exact
engine's values on hand-sized cases and the reference's on generated ones,
and names the mistake by matching their outputs to what each catalogued
mistake gives on that case.
"""
