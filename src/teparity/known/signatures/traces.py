"""The signatures of defects that break a trace invariant (``TraceInvariantBroken``) or run the backward FP8 sync a
wrong number of times (``SyncCountWrong``): predicates over the violations' invariants and messages, and the sync
counts per rank and step."""

from __future__ import annotations

import re
from typing import Any

from teparity.judge.failures import SyncCountWrong, TraceInvariantBroken, TraceInvariantBrokenEvidence
from teparity.known.defect import Signature
from teparity.stack.environment import Environment


def _no_backward_sync_at_all(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank's backward trace has no sync and nothing else is broken, or no rank ran a sync at any step."""
    if "violations" in evidence:
        violations = evidence["violations"]
        return len(violations) == evidence.get("ranks") and all(
            v["invariant"] == "backward-sync-count" and "found 0 " in v["message"] for v in violations
        )
    return bool(evidence["counts"]) and all(not any(steps) for steps in evidence["counts"].values())


_NOTHING_RECOMPUTED = re.compile(r"\b0 forward TE linears recomputed \(at \[\]\)")


def _checkpointed_linears_not_recomputed(evidence: TraceInvariantBrokenEvidence, env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "recomputed-te-linears" and _NOTHING_RECOMPUTED.search(v["message"]) for v in violations
    )


#: A state named in a one-update-per-fp8-state violation, updated once in a forward trace and once in a backward one.
_STATE_UPDATED_IN_FORWARD_AND_BACKWARD = re.compile(
    r"'get_te_fp8_state_\d+': \['rank \d+ forward trace #\d+', 'rank \d+ backward trace #\d+'\]")


def _recompute_updates_the_forward_state_again(evidence: TraceInvariantBrokenEvidence, env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "one-update-per-fp8-state"
        and 0 < len(_STATE_UPDATED_IN_FORWARD_AND_BACKWARD.findall(v["message"])) == v["message"].count("'get_te_fp8_state_")
        for v in violations
    )


# -- the signatures -------------------------------------------------------------------------------

NO_BACKWARD_SYNC_AT_ALL = Signature(
    (TraceInvariantBroken, SyncCountWrong),
    _no_backward_sync_at_all,
    "every rank's backward trace breaks backward-sync-count with none found, and nothing else, "
        "or every rank ran no backward sync at any step",
    bounded=True,
)
CHECKPOINTED_LINEARS_NOT_RECOMPUTED = Signature(
    TraceInvariantBroken,
    _checkpointed_linears_not_recomputed,
    "the only broken trace invariant is recomputed-te-linears, with no forward TE linear recomputed in "
        "the backward trace",
)
RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN = Signature(
    TraceInvariantBroken,
    _recompute_updates_the_forward_state_again,
    "every broken trace invariant is one-update-per-fp8-state, each state it names updated once in a "
        "forward trace and once in a backward trace",
)
