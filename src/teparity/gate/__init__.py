"""The gate around the tiers, wired into pytest by ``teparity.plugin``: the run's settings (``settings``), the
process that starts it (``controller``, ``header``, ``schedule`` with its ``durations.json``, ``reporter``) and the
processes that run its tests (``worker``, ``known_marks``, ``fixtures``, the numerics tier's hypothesis ``profiles``,
the ``loggers`` registry made safe to walk); how a test runs ranks (``ranks``) and parity pairs (``pairs``); the run's
``timeline``. The report it writes is ``teparity.report``'s; the compatibility matrix rendered from reports is in
``teparity.tools`` (``teparity.tools.matrix``, ``teparity.tools.ranges``)."""
