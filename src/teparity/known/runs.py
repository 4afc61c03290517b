"""The committed runs under docs/results/ that the known defects' entries (``teparity.known.upstream``) cite: in
their ``seen`` and their bisected bounds' logs; and ``SEEN_TE29``, the TE range of the entries seen with TE 2.9.0 only."""

from __future__ import annotations

#: The run that showed every entry at once: all 12 TE releases x thunder 0.2.6 and 0.2.7.dev20260201.
MATRIX_RUN = "docs/results/h200-matrix-8a03814"
FEATURES_RUN = "docs/results/h200-te2.20.2-aa780f0-features"
FEATURES_RUN_TE29 = "docs/results/h200-te2.9.0-65ae0b1-features"
#: thunder 0.2.4, 0.2.6.dev20251019, 0.2.6 and 0.2.7.dev20260201 with TE 2.9.0 at 82bfe86.
FEATURES_RUN_TE29_82BFE86 = "docs/results/h200-te2.9.0-82bfe86-features"
#: thunder 0.2.2 .. 0.2.7.dev20260201 with TE 2.9.0 at one commit: 0.2.3 and 0.2.4 showed entries' signatures
#: outside their ranges then (near misses), which set the lower bounds below.
VERSIONS_RUN_TE29 = "docs/results/h200-te2.9.0-2bafd7a"
#: The CPU runs of thunder's FSDP transform with LAYER bucketing: the oldest build, and the bisect of the fix.
FSDP_LAYER_BISECT = "docs/results/cpu-bisect-fsdp-layer"
SYNC_SPLIT_BISECT = "docs/results/cpu-bisect-legacy-sync-split"
CPU_BUILDS_RUN = "docs/results/cpu-trace-builds-37d5c96"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 28d36b3, with the bounds above in place.
RELEASES_RUN_TE29 = "docs/results/h200-te2.9.0-28d36b3"
#: thunder 0.2.5 and 0.2.6.dev20251019 with TE 2.20.2: the legacy executor's lost TE.
TE220_THUNDER025_RUN = "docs/results/h200-te2.20.2-c71c746"
#: thunder 0.2.2, 0.2.3, 0.2.4, 0.2.5.dev20250803 and 0.2.7.dev20251214 with TE 2.20.2.
TE220_OLDER_BUILDS_RUN = "docs/results/h200-te2.20.2-84520fd"
#: thunder 0.2.2 .. 0.2.6, 0.2.6.dev20251019 and two weekly builds with TE 2.9.0 at 363ddd5.
RELEASES_WEEKLIES_RUN_TE29 = "docs/results/h200-te2.9.0-363ddd5"
#: The GPU bisects of entries' bounds with TE 2.9.0, each judged by its entry alone (``bisect --entry``).
ENTRY_BISECTS_TE29 = "docs/results/h200-te2.9.0-363ddd5-bisects"
#: Two GPU fix bisects from 0.2.5.dev20250803 with TE 2.9.0 (the second cut off by its time limit).
FIX_BISECTS_TE29 = "docs/results/h200-te2.9.0-b98ccf1-bisects"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 04f6fc3 (each exit 0).
CLEAN_RELEASES_RUN_TE29 = "docs/results/h200-te2.9.0-04f6fc3"
#: Six GPU bisects of entries' bounds with TE 2.9.0 at 04f6fc3.
RANGE_BISECTS_TE29 = "docs/results/h200-te2.9.0-04f6fc3-bisects"
#: The weekly builds those bisects moved into or out of ranges, with TE 2.9.0 at db1ecfc.
WEEKLIES_RUN_TE29 = "docs/results/h200-te2.9.0-db1ecfc"
#: Seen with TE 2.9.0 only: the TE bound of the entries first seen there stops at the next release.
SEEN_TE29 = ">=2.9,<2.10"

#: The gate with TE 1.8.0 on thunder 0.2.0.dev20240728 and dev20240901 (the CPU runs of 2024 builds behind the entries
#: it led to: docs/results/cpu-thunder-2024-sdpa-checkpoint-nograd).
TE18_RUN = "docs/results/h200-te1.8.0-4306794"
#: The gate with TE 1.8.0 on thunder 0.2.0.dev20240728, dev20240818 and dev20240901 at b4f3e73.
TE18_RUN_B4F3E73 = "docs/results/h200-te1.8.0-b4f3e73"
#: The declared matrix's TE 2.20.2 stacks (thunder 0.2.2 .. 0.2.7.dev20260201) at one commit.
MATRIX_TE220 = "docs/results/h200-matrix-cceeca7"
#: The declared matrix, every stack at one commit.
MATRIX = "docs/results/h200-matrix-4a18837"
#: The combinations users train with (checkpoint resume, new input shapes, a linear called twice, block scaling) on
#: thunder 0.2.2 .. 0.2.7.dev20260201 with TE 2.9.0.
COMBINATIONS_RUN_TE29 = "docs/results/h200-te2.9.0-13aaff2-combinations"
#: The same rows with TE 2.20.2, after the fixes that run led to.
COMBINATIONS_RUN_TE220 = "docs/results/h200-te2.20.2-640b276-combinations"
#: The strategies' first rows (torch DDP and FSDP2 around thunderfx, FSDP + activation checkpointing) on thunder 0.2.2 ..
#: 0.2.7.dev20260201 with TE 2.9.0, before their failures were registered.
STRATEGIES_RUN_TE29 = "docs/results/h200-te2.9.0-8cf5409-strategies"
#: The CPU matrix on torch 2.12.1 (every declared thunder build, no TE) at 301e53a, and the reproduction on torch
#: 2.11.0, 2.12.0 and 2.12.1.
CPU_TORCH212_RUN = "docs/results/cpu-torch2.12.1-301e53a"
