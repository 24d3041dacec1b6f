"""The interview drills beyond the arithmetic: shapes at every point of the
production forward, parameter/FLOP/memory counts, masks in every PyTorch
convention, the concept bank and its follow-ups, and a timed mock
interview; every answer computed or checked by code, asked on a view and a
stream the caller passes in.

Every answer is computed or checked by code, never typed into a table:

* :mod:`.record` -- the record every drill shares: a :class:`~.record.Question`
  with its checked answer, the parsing of typed answers, and :func:`~.record.grade`;
* :mod:`.shapes` -- shapes at named points of the production forward, from
  :func:`tutor.numeric.trace.production_trace`;
* :mod:`.counts` -- parameters, FLOPs, the weights' memory, the KV cache: the
  formulas, each with its source;
* :mod:`.inference` -- the arithmetic of inference (prefill and decode,
  PagedAttention, the caches of MLA, of a sliding window, quantized) for
  published configurations (:data:`~.inference.PRESETS`) or a YAML file of one's own;
* :mod:`.masks` -- one mask in every PyTorch convention, and what fully masked
  rows and the -1e9 idiom do (:data:`~.masks.FACTS`, each checked against torch);
* :mod:`.bank` and :mod:`.concepts` -- the concept bank (YAML, a pydantic
  schema, checked by ``validate``) and its questions with chains of follow-ups;
* :mod:`.interview` -- the timed mock interview and its report;
* :mod:`.driver` -- asking questions on an injected stream, with an injected clock;
* :mod:`.runs` -- a run with the progress store (what the command line calls);
* :mod:`.results` -- drill answers in the store, and the drills section of ``stats``.

Nothing here prints: :mod:`tutor.render.drill` renders, :mod:`tutor.cli.drill`
parses options.  Nothing imported by this package's ``__init__`` pulls in numpy
or sympy (``attn-tutor --help`` stays fast).
"""
