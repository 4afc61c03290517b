"""Rank processes: spawn them, supervise them, join them, and turn every way they go wrong into a failure
with evidence. No test policy lives here: the backend, what a rank does before and around each run
(``teparity.inrank.task``) and which mode to use are the caller's (``teparity.plugin``).

- ``outcome``: a failed run's evidence (``RanksFailed``), shared by every mode;
- ``rank``: what a spawned rank does from its first instant (log capture, dying with its parent, joining);
- ``fresh``: ``run_ranks``, new processes for one run;
- ``pool``: ``warm_ranks``, processes kept between runs;
- ``torchrun``: ``run_joined``, when torchrun started this process as one rank.
"""
