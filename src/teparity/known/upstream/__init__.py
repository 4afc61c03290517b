"""The known upstream defects' entries (``teparity.known.defect.KnownDefect``), a module by what they concern:

- ``legacy``, ``functional``: the TE executors' own code;
- ``distributed``: thunder's DDP and FSDP transforms;
- ``reductions``: the amax reduction across data-parallel ranks;
- ``fp8_state``: where thunder keeps TE's FP8 state (cache entries, calls, recipes, checkpoints);
- ``checkpointing``: activation checkpointing;
- ``tracing``: thunder's tracing and transforms beside the executors, and a thunder/torch pairing.

Each entry is a constant named by its id (capitals, ``_`` for ``-`` and ``.``); the runs the entries cite are in
``teparity.known.runs``. An entry is in force once ``teparity.known.entries.REGISTRY`` names it, which orders them."""
