"""The gate around the tiers, wired into pytest by ``teparity.plugin``: the run's settings (``settings``), the
process that starts it (``controller``, ``header``, ``schedule``, ``reporter``) and the processes that run its
tests (``worker``, ``known_marks``, ``fixtures``); how a test runs ranks (``ranks``) and parity pairs
(``pairs``); the parity report (``report``, ``timeline``) and the compatibility matrix rendered from reports
(``matrix``, ``ranges``)."""
