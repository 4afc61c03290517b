"""The known upstream defects, a module each (``teparity.known.defect.KnownDefect``): a module named by the defect's
id (``_`` for ``-`` and ``.``) whose ``ENTRY`` holds all of it, its checks and executors, its thunder, TE and torch
ranges, its signature (``teparity.known.signatures`` has the predicates to build it from), its model where it is a
behaviour (``teparity.known.models``), its cause, and the runs under docs/results/ that showed it and placed its
bounds. Its reproduction is ``teparity/known/repros/<id>.py``. The registry (``teparity.known.registry``) discovers
the modules: a defect is in force once its module exists. docs/registry.md shows one whole."""
