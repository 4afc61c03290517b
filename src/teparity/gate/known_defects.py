"""Known upstream defects: one registry, matched narrowly, so the gate is green on a stack's known state
and red on anything new.

Each entry names the checks and executors it covers, the thunder and TE versions where it holds, its
failure signature (a failure type from ``teparity.judge.failures`` plus a predicate over that failure's
evidence), the upstream cause and the committed run that showed it. The plugin marks every test the
entry covers on the installed stack as a strict xfail whose ``raises`` is the entry's own exception
type, and converts a failure to that type only when the signature matches (``match``). So:

- the defect itself: xfail (``known`` in the parity report, with the entry id);
- any other failure of the same test: fails for real;
- a build that fixes it: XPASS, which fails strict and names the entry to retire;
- outside every version range: no mark, the test runs strict; a failure there that matches an entry's
  signature anyway (a near miss) still fails, labelled with the entry and the range that excludes this
  stack, and the bisect command that would settle where the range really starts;
- ``pytest --runxfail``: the whole truth, each matched failure labelled with its entry.

Ranges are PEP 440 specifiers, so a bound named by release leaves out that release's own dev builds:
``>=0.2.6`` does not hold 0.2.6.dev20251019, which is a build before 0.2.6. Name a bound by build
(``>=0.2.6.dev20250324``) where a bisect found it, and cite that bisect's log in ``bounds``
(``python -m teparity bisect`` writes it; a harness test checks that the log's boundary is the bound).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, Literal

from packaging.specifiers import SpecifierSet

from teparity.judge.failures import (
    PartedFromEager,
    RaisedOnTheRanks,
    ReducedOutsideTheGroup,
    SilentFallback,
    SyncCountWrong,
    ThunderRunRaised,
    TraceInvariantBroken,
)
from teparity.launch.outcome import RanksFailed
from teparity.stack.environment import Environment
from teparity.stack.versions import Versions, parse_version

Predicate = Callable[[dict[str, Any], Environment], bool]


class KnownDefectSeen(AssertionError):
    """A failure that matched a registry entry (each entry has its own subclass: ``entry.seen_type``)."""

    entry_id = ""


class NearMiss(AssertionError):
    """A strict failure that matches an entry's signature outside its version ranges: it fails all the
    same (nothing says the defect holds here), and says which entry and which range."""


@dataclasses.dataclass(frozen=True)
class BisectedBound:
    """One clause of an entry's range, named by build, and the bisect log that found that build."""

    package: Literal["thunder", "te"]
    #: A clause of the entry's ``thunder`` or ``te`` range, e.g. ">=0.2.6.dev20250324".
    bound: str
    #: The bisect.json under docs/results/ whose boundary is that build.
    log: str


@dataclasses.dataclass(frozen=True)
class KnownDefect:
    id: str
    summary: str
    #: TE executors; None for a check that has none (it runs thunder without TE).
    executors: tuple[str | None, ...]
    #: Check names without their parameter part ("numerics" covers "numerics[delayed]" and the rest), or
    #: with it, for one parametrization alone ("fsdp-transform-matches-torch-fsdp[zero2-layer]").
    checks: tuple[str, ...]
    thunder: str
    te: str
    #: The failure type(s) the judging code raises for it (``RanksFailed``: a rank raised outside a judge).
    failure: type[AssertionError] | tuple[type[AssertionError], ...]
    matches: Predicate
    #: The predicate in words (shown in the xfail reason and the docs).
    signature: str
    cause: str
    #: Committed runs under docs/results/ that showed it.
    seen: tuple[str, ...]
    #: The bounds that a bisect placed, each with its log (the others stop where the runs stopped).
    bounds: tuple[BisectedBound, ...] = ()
    #: A thunder defect that needs no TE: it holds where TE is absent too (``te`` still bounds it where
    #: TE is installed).
    without_te: bool = False

    def holds_for(self, check: str, executor: str | None, versions: Versions) -> bool:
        """Whether a test of ``check`` and ``executor`` on these versions is covered by this entry."""
        return self.names(check, executor) and self.holds_for_versions(versions)

    def names(self, check: str, executor: str | None) -> bool:
        """Whether this entry is about ``check`` and ``executor``, on any versions."""
        return executor in self.executors and (check in self.checks or check.split("[", 1)[0] in self.checks)

    def holds_for_versions(self, versions: Versions) -> bool:
        return _within(versions.thunder, self.thunder) and self._holds_for_te(versions.transformer_engine)

    def _holds_for_te(self, te: str | None) -> bool:
        return _within(te, self.te) or (self.without_te and te is None)

    def te_range(self) -> str:
        """The TE versions in words: the range, and whether it holds without TE."""
        return f"`{self.te}`" + (", or none installed" if self.without_te else "")

    def excluded(self, versions: Versions) -> list[str]:
        """Which of this entry's ranges leave these versions out, in words (empty when both hold)."""
        said = []
        if not _within(thunder := versions.thunder, self.thunder):
            said.append(f"thunder {thunder or 'absent'} not in `{self.thunder}`{_before_release(thunder, self.thunder)}")
        if not self._holds_for_te(te := versions.transformer_engine):
            said.append(f"TE {te or 'absent'} not in {self.te_range()}{_before_release(te, self.te)}")
        return said

    def reason(self) -> str:
        return (
            f"known upstream defect {self.id}: {self.summary} [signature: {self.failure_names()} where "
            f"{self.signature}; cause: {self.cause}; seen: {', '.join(self.seen)}] "
            f"(an XPASS means it is fixed: retire '{self.id}' from teparity/gate/known_defects.py)"
        )

    def failure_names(self) -> str:
        kinds = self.failure if isinstance(self.failure, tuple) else (self.failure,)
        return " or ".join(kind.__name__ for kind in kinds)

    @property
    def seen_type(self) -> type[KnownDefectSeen]:
        return _SEEN_TYPES[self.id]


def _within(version: str | None, specifier: str) -> bool:
    parsed = parse_version(version or "")
    return parsed is not None and SpecifierSet(specifier, prereleases=True).contains(parsed)


def _before_release(version: str | None, specifier: str) -> str:
    """A note where ``version`` is a dev or pre-release build of a release the range holds."""
    parsed = parse_version(version or "")
    if parsed is None or not parsed.is_prerelease or not _within(parsed.base_version, specifier):
        return ""
    return f" (a build before {parsed.base_version}, which PEP 440 orders below it: name the bound by build once a bisect finds it)"


# -- predicates: each reads only the evidence its failure type carries ----------------------------


def _legacy_module_lost_te(evidence: dict[str, Any], env: Environment) -> bool:
    """No linear held, and the legacy executor module's TE import names CPUOffloadEnabled: its checker declines
    every linear, for the legacy executor and for the functional one of the builds that borrow it."""
    failed = env.executors["legacy"].te_imports_failed or ""
    return evidence["claimed"] == 0 and "CPUOffloadEnabled" in failed


def _fp8_state_per_cache_entry(evidence: dict[str, Any], env: Environment) -> bool:
    micro = evidence["micro_batches"]
    entries = [n for by_case in (evidence["cache_entries"] or {}).values() for n in by_case.values()]
    forwards = evidence["forwards_recorded"] or {}
    return (
        micro > 1
        and not evidence["case_errors"]
        and bool(entries) and all(n == 2 for n in entries)
        and evidence["first_difference"] is not None and evidence["first_difference"][0] == 0
        and (evidence["first_difference"][1] or 0) >= 1
        and forwards.get("thunder", 0) < forwards.get("eager", 0)
    )


#: The run that showed every entry at once: all 12 TE releases x thunder 0.2.6 and 0.2.7.dev20260201.
_MATRIX_RUN = "docs/results/h200-matrix-8a03814"

_NO_FP32_BIAS_ALGO = "Unable to find suitable cuBLAS GEMM algorithm"


def _fp32_bias_gemm(evidence: dict[str, Any], env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        evidence["numeric_differences"] == 0
        and bool(errors)
        and all(
            e["side"] == "thunder" and e["case"].dtype == "float32" and e["case"].bias and _NO_FP32_BIAS_ALGO in e["error"]
            for e in errors
        )
    )


def _group_ignored(evidence: dict[str, Any], env: Environment) -> bool:
    return evidence["thunder_equal_across_world"] and not env.executors[evidence["executor"]].honors_fp8_group


def _no_allreduce_behind_input_grad(evidence: dict[str, Any], env: Environment) -> bool:
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.ValueError"
        and "CollectionProxy" in e["message"] and "had an unexpected type" in e["message"]
        and {"optimize_allreduce_in_ddp_backward", "get_bsym_of_allreduce_of_grad"} <= set(e["functions"])
        for e in errors
    )


def _no_backward_sync_at_all(evidence: dict[str, Any], env: Environment) -> bool:
    """Every rank's backward trace has no sync and nothing else is broken, or no rank ran a sync at any step."""
    if "violations" in evidence:
        violations = evidence["violations"]
        return len(violations) == evidence.get("ranks") and all(
            v["invariant"] == "backward-sync-count" and "found 0 " in v["message"] for v in violations
        )
    return bool(evidence["counts"]) and all(not any(steps) for steps in evidence["counts"].values())


_UNPACK_AT_TE_LINEAR = re.compile(
    r"= te_linear_\d+\(.*\n(?:.*\n){0,3}?.*ValueError: (?:too many values to unpack \(expected \d+\)|"
    r"not enough values to unpack \(expected \d+, got \d+\))"
)


def _tracebacks_of_thunder(evidence: dict[str, Any]) -> list[str] | None:
    """The thunder side's tracebacks in any of the three shapes the failure takes, or None where a failure
    of another kind is among them (an eager case error, a rank that hung or died)."""
    if "case_errors" in evidence:  # PartedFromEager: cases that raised on a side, and no number that differs
        errors = evidence["case_errors"]
        only_thunder = errors and all(e["side"] == "thunder" for e in errors) and not evidence["numeric_differences"]
        return [e["error"] for e in errors] if only_thunder else None
    if "failures" in evidence:  # RanksFailed: ranks that raised outside a judge
        failures = evidence["failures"]
        return [f["detail"] for f in failures] if failures and all(f["kind"] == "raised" for f in failures) else None
    return [e["error"] for e in evidence.get("errors") or []] or None  # ThunderRunRaised


def _legacy_unpack_at_te_linear(evidence: dict[str, Any], env: Environment) -> bool:
    """Every thunder-side error is a ValueError unpacking a te_linear_N call's result (numbers differ by build)."""
    tracebacks = _tracebacks_of_thunder(evidence)
    return bool(tracebacks) and all(_UNPACK_AT_TE_LINEAR.search(text) for text in tracebacks)


def _no_bucket_for_the_input_grad(evidence: dict[str, Any], env: Environment) -> bool:
    errors = evidence["errors"]
    return len(errors) == evidence["world_size"] and all(
        e["type"] == "builtins.RuntimeError" and e["message"].startswith("Invalid index=0, ")
        and {"_apply_bucketing_to_backward_reduce_scatter", "create_map_from_unsharded_grad_to_bucket"} <= set(e["functions"])
        for e in errors
    )


def _no_grad_left_to_torch(evidence: dict[str, Any], env: Environment) -> bool:
    return evidence["claimed"] == 0 and not env.executors[evidence["executor"]].te_imports_failed


def _state_restarts_each_step(evidence: dict[str, Any], env: Environment) -> bool:
    by_step = evidence["forwards_by_step"] or {}
    thunder, eager = by_step.get("thunder") or [], by_step.get("eager") or []
    first = evidence["first_difference"]
    return (
        not evidence["case_errors"]
        and len(thunder) > 1 and all(n == 1 for n in thunder)
        and len(eager) == len(thunder) and eager[-1] > 1
        and first is not None and first[0] == 1
    )


def _bf16_copies_quantized(evidence: dict[str, Any], env: Environment) -> bool:
    """Linear "0" (fed the fp32 input): thunder's step-0 input and weight amaxes are eager TE's rounded
    to bfloat16, and at least one of them differs from eager's."""
    import torch

    amaxes = evidence["first_amaxes"] or {}
    eager, thunder = (amaxes.get(side, {}).get("0", {}) for side in ("eager", "thunder"))
    roles = ("input", "weight")
    if not set(roles) <= eager.keys() & thunder.keys():
        return False
    rounded = {role: float(torch.tensor(eager[role]).to(torch.bfloat16).float()) for role in roles}
    return (
        not evidence["case_errors"]
        and all(thunder[role] == rounded[role] for role in roles)
        and any(thunder[role] != eager[role] for role in roles)
    )


def _recompute_records_amax_again(evidence: dict[str, Any], env: Environment) -> bool:
    """Under checkpointing: after step 0, thunder's first (recomputed) linear holds an input amax in the
    history row that the step's update zeroed, where eager TE's row is zero."""
    pending = evidence.get("first_pending_amaxes") or {}
    eager, thunder = (pending.get(side, {}).get("0", {}).get("input") for side in ("eager", "thunder"))
    return (
        not evidence["case_errors"]
        and "activation checkpointing" in evidence["variant"]
        and eager == 0.0 and thunder is not None and thunder != 0.0
    )


def _ranks_part_unreduced(evidence: dict[str, Any], env: Environment) -> bool:
    """No case raised and the ranks' thunder FP8 states differ: nothing reduced the amaxes across ranks."""
    return not evidence["case_errors"] and evidence.get("ranks_parted", 0) > 0


_NOTHING_RECOMPUTED = re.compile(r"\b0 forward TE linears recomputed \(at \[\]\)")


def _checkpointed_linears_not_recomputed(evidence: dict[str, Any], env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "recomputed-te-linears" and _NOTHING_RECOMPUTED.search(v["message"]) for v in violations
    )


#: A state named in a one-update-per-fp8-state violation, updated once in a forward trace and once in a backward one.
_STATE_UPDATED_IN_FORWARD_AND_BACKWARD = re.compile(
    r"'get_te_fp8_state_\d+': \['rank \d+ forward trace #\d+', 'rank \d+ backward trace #\d+'\]")


def _recompute_updates_the_forward_state_again(evidence: dict[str, Any], env: Environment) -> bool:
    violations = evidence["violations"]
    return bool(violations) and all(
        v["invariant"] == "one-update-per-fp8-state"
        and 0 < len(_STATE_UPDATED_IN_FORWARD_AND_BACKWARD.findall(v["message"])) == v["message"].count("'get_te_fp8_state_")
        for v in violations
    )


def _recompute_reads_an_unbound_forward_tensor(evidence: dict[str, Any], env: Environment) -> bool:
    errors = evidence["case_errors"]
    return (
        "compiled with thunderfx" in evidence["variant"] and "activation checkpointing" in evidence["variant"]
        and bool(errors)
        and all(
            e["side"] == "thunder" and e["error"].startswith("UnboundLocalError: cannot access local variable")
            and "in backward_fn" in e["error"]
            for e in errors
        )
        and any("te_functional_linear_bwd(" in e["error"] for e in errors)
    )


#: Every gate check that needs TE to run a linear (a harness test keeps it in step with the tiers).
_TE_RUNS = ("te-claims-every-linear", "te-trace-invariants", "numerics", "numerics-fp32-bias", "ddp", "ddp-first-step",
            "ddp-grad-accumulation", "ddp-fp8-group-per-rank", "ddp-fp8-group-subgroups-of-2", "ddp-llama",
            "ddp-llama-grad-accumulation", "activation-checkpointing", "thunderfx", "recipe-change", "inference",
            "torch-autocast", "llama-block", "fsdp")
_FP8_GROUPS = ("ddp-fp8-group-per-rank", "ddp-fp8-group-subgroups-of-2")
_FEATURES_RUN = "docs/results/h200-te2.20.2-features/call1-aa780f0"
_FEATURES_RUN_TE29 = "docs/results/h200-te2.9.0-features/call2-65ae0b1"
#: thunder 0.2.2 .. 0.2.7.dev20260201 with TE 2.9.0 at one commit: 0.2.3 and 0.2.4 showed entries' signatures
#: outside their ranges then (near misses), which set the lower bounds below.
_VERSIONS_RUN_TE29 = "docs/results/h200-te2.9.0-sixth/call3-2bafd7a"
#: The CPU runs of thunder's FSDP transform with LAYER bucketing: the oldest build, and the bisect of the fix.
_FSDP_LAYER_BISECT = "docs/results/cpu-bisect-fsdp-layer"
_SYNC_SPLIT_BISECT = "docs/results/cpu-bisect-legacy-sync-split"
_CPU_BUILDS_RUN = "docs/results/cpu-trace-builds-37d5c96"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 28d36b3, after the entries above were placed.
_RELEASES_RUN_TE29 = "docs/results/h200-te2.9.0-seventh/call1-28d36b3"
#: thunder 0.2.5 and 0.2.6.dev20251019 with TE 2.20.2 (pairs no run had named): the legacy executor's lost TE.
_NEW_PAIRS_RUN_TE220 = "docs/results/h200-te2.20.2-ninth/call1-c71c746"
#: thunder 0.2.2, 0.2.3, 0.2.4, 0.2.5.dev20250803 and 0.2.7.dev20251214 with TE 2.20.2 (pairs no run had named).
_NEW_PAIRS_RUN_TE220_TENTH = "docs/results/h200-te2.20.2-tenth/call1-84520fd"
#: thunder 0.2.2 .. 0.2.6, 0.2.6.dev20251019 and two weekly builds with TE 2.9.0 at 363ddd5.
_RELEASES_RUN_TE29_NINTH = "docs/results/h200-te2.9.0-ninth/call1-363ddd5"
#: The GPU bisects of entries' bounds with TE 2.9.0, each judged by its entry alone (``bisect --entry``).
_ENTRY_BISECTS_TE29 = "docs/results/h200-te2.9.0-ninth/call2-363ddd5-bisects"
#: Two GPU fix bisects from 0.2.5.dev20250803 with TE 2.9.0 (the call's time ran out in the second one).
_FIX_BISECTS_TE29 = "docs/results/h200-te2.9.0-ninth/call3-b98ccf1-fix-bisects"
#: thunder 0.2.2 .. 0.2.6 and 0.2.6.dev20251019 with TE 2.9.0 at 04f6fc3 (each exit 0), and six entry bisects.
_RELEASES_RUN_TE29_TENTH = "docs/results/h200-te2.9.0-tenth/call1-04f6fc3"
_TENTH_BISECTS_TE29 = f"{_RELEASES_RUN_TE29_TENTH}/bisects"
#: The weekly builds those bisects moved into or out of ranges, with TE 2.9.0 at db1ecfc.
_WEEKLIES_RUN_TE29_TENTH = "docs/results/h200-te2.9.0-tenth/call2-db1ecfc"
#: The legacy sync scenarios' checks: they run the legacy executor's TE linears where TE is installed.
_LEGACY_SYNC = ("bwd-sync-placement", "bwd-sync-runs-once", "fwd-has-no-sync")
#: Seen with TE 2.9.0 only: the TE bound of the entries first seen there stops at the next release.
_SEEN_TE29 = ">=2.9,<2.10"

REGISTRY: tuple[KnownDefect, ...] = (
    KnownDefect(
        id="legacy-executor-loses-te-from-te-2.10",
        summary="thunder 0.2.6's legacy TE executor claims no linear with TE 2.10+: a silent fallback to torch",
        executors=("legacy",),
        checks=_TE_RUNS,
        thunder=">=0.2.0.dev0,<0.2.7",
        te=">=2.10",
        failure=SilentFallback,
        matches=_legacy_module_lost_te,
        signature="no linear is held by TE and the executor module's own TE import error names CPUOffloadEnabled",
        cause="thunder/executors/transformer_engine_v1ex.py (transformer_engineex.py before 0.2.6.dev20250928) imports "
        "CPUOffloadEnabled from transformer_engine.pytorch.cpu_offload inside try/except; TE 2.10 removed that name, "
        "so the module sets TE_AVAILABLE = False and its checker declines every linear. The same import is in every "
        "build read, the first on the index (0.2.0.dev20240404) to 0.2.7.dev20251109 (docs/results/"
        "wheels-legacy-cpu-offload-import), so there is no first bad thunder build to bisect; run with TE 2.12-2.20 "
        "on 0.2.5, 0.2.6.dev20251019 and 0.2.6. The legacy executor was removed in thunder 0.2.7.dev20251130 "
        "(PR #2762), so no fix is expected",
        seen=(_MATRIX_RUN, "docs/results/h200-te2.12.0", "docs/results/h200-x2-te2.12.0",
              "docs/results/h200-x2-te2.16.1-thunder0.2.6", "docs/results/h200-x2-te2.20.2-thunder0.2.6",
              _NEW_PAIRS_RUN_TE220),
    ),
    KnownDefect(
        id="functional-executor-loses-te-from-te-2.10",
        summary="the functional TE executor of thunder 0.2.3 .. 0.2.5.dev20250824 claims no linear with TE 2.10+: it "
        "asks the legacy executor's checker, which declines every linear there",
        executors=("functional",),
        checks=_TE_RUNS,
        thunder=">=0.2.3,<=0.2.5.dev20250824",
        te=">=2.10",
        failure=SilentFallback,
        matches=_legacy_module_lost_te,
        signature="no linear is held by TE and the legacy executor module's own TE import error names CPUOffloadEnabled",
        cause="thunder/executors/transformer_engine_v2ex_impl.py imports _linear_checker from "
        "thunder/executors/transformer_engineex.py (the legacy executor), which returns False unless that module's "
        "TE_AVAILABLE; with TE 2.10+ its CPUOffloadEnabled import fails (legacy-executor-loses-te-from-te-2.10), so "
        "the functional executor declines every linear too. The import is in every build from 0.2.3 (the functional "
        "executor's first) to 0.2.5.dev20250824 and gone from 0.2.5.dev20250831 on, read in the wheels "
        "(docs/results/wheels-functional-borrows-legacy-checker); run with TE 2.20.2 on 0.2.3, 0.2.4 and "
        "0.2.5.dev20250803, where 0.2.5 and 0.2.6.dev20251019 claimed every linear",
        seen=(_NEW_PAIRS_RUN_TE220_TENTH, _NEW_PAIRS_RUN_TE220),
    ),
    KnownDefect(
        id="grad-accumulation-fp8-state-per-cache-entry",
        summary="under skip_data_parallel_grad_sync each thunder cache entry keeps its own TE FP8 state, "
        "so the synced micro-batch does not see the amaxes of the ones before it",
        executors=("legacy", "functional"),
        checks=("ddp-grad-accumulation", "ddp-llama-grad-accumulation"),
        thunder=">=0.2.0.dev20240609,<0.2.8",
        te=">=1.6,<2.21",
        failure=PartedFromEager,
        matches=_fp8_state_per_cache_entry,
        signature="no case raised, thunder compiled two cache entries (the no-sync one and the synced one) on every rank, step 0's "
        "micro-batch 0 matches and the first difference is a later micro-batch of step 0, and thunder's "
        "step-0 amax history records fewer forward passes than eager TE's",
        cause="thunder/__init__.py records get_skip_data_parallel_grad_sync() in the cache info "
        "(cache_info['no_grad_sync']), so the no-sync micro-batch compiles its own cache entry; each entry builds "
        "its own TE state (legacy: a new TELinear per linear, transformer_engine_v1ex.py; functional: new "
        "get_te_fp8_state recipe states, transformer_engineex_impl.py), where eager TE's micro-batches share "
        "one module's fp8_meta. Run on 0.2.6 and 0.2.7 dev builds with TE 2.9-2.20; below that the range is "
        "read, not run: the same cache_info['no_grad_sync'] and TELinear per cache entry are in every build "
        "from 0.2.0.dev20240609 (TE 1.6+ accepted) to 0.2.6",
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-thunder0.2.6", "docs/results/h200-te2.12.0"),
    ),
    KnownDefect(
        id="functional-fp32-bias-in-fp8-gemm",
        summary="thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects",
        executors=("functional",),
        checks=("numerics-fp32-bias",),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        failure=PartedFromEager,
        matches=_fp32_bias_gemm,
        signature=f"every difference is a thunder-side case with fp32 parameters and a bias raising '{_NO_FP32_BIAS_ALGO}'",
        cause="thunder/executors/transformer_engineex_impl.py _linear_fwd_impl calls "
        "BasicLinear._functional_forward(bias=bias, dtype=w.dtype, with_quantized_compute=True) with the fp32 "
        "bias, which general_gemm fuses into the FP8 GEMM; cuBLASLt has no FP8 GEMM with an fp32 bias. Eager "
        "te.Linear casts the bias to bf16 for FP8 GEMMs (module/linear.py _Linear.forward: 'cuBLAS does not "
        "support FP8 GEMM with FP32 bias'); te.ops does not fuse an fp32 bias",
        seen=(_MATRIX_RUN, "docs/results/h200-x2-te2.9.0-thunder0.2.6", "docs/results/h200-te2.9.0-thunder0.2.6",
              "docs/results/h200-te2.12.0", _FEATURES_RUN_TE29, _VERSIONS_RUN_TE29),
    ),
    KnownDefect(
        id="legacy-fp8-group-ignored",
        summary="thunder's legacy TE executor wraps its forward in fp8_autocast without the caller's fp8_group: "
        "amaxes are reduced over the world",
        executors=("legacy",),
        checks=_FP8_GROUPS,
        thunder=">=0.2.0.dev0,<0.2.7",
        te=">=1.6,<2.21",
        failure=ReducedOutsideTheGroup,
        matches=_group_ignored,
        signature="thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's autocast wrapper names no fp8_group",
        cause="thunder/executors/transformer_engine_v1ex.py TE_CTX_STR: fp8_autocast(fp8_recipe=...) with no fp8_group. "
        "Run with TE 2.9-2.20; TE 1.6-1.8 is read, not run: the same TE_CTX_STR (transformer_engineex.py before "
        "0.2.6) is in every build from 0.2.0.dev20240609 to 0.2.6, and it passes no group whatever the TE",
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-thunder0.2.6", "docs/results/h200-x2-te2.9.0-thunder0.2.6",
              "docs/results/h200-x4-te2.9.0-thunder0.2.6"),
    ),
    KnownDefect(
        id="functional-fp8-group-ignored",
        summary="thunder's functional TE executor all-reduces amax histories over the default process group, "
        "ignoring fp8_autocast's group",
        executors=("functional",),
        checks=_FP8_GROUPS,
        thunder=">=0.2.5.dev20250824,<0.2.8",
        te=">=2.9,<2.21",
        failure=ReducedOutsideTheGroup,
        matches=_group_ignored,
        signature="thunder's FP8 state is identical on every rank (reduced over the world) where eager TE's "
        "differs between fp8 groups, and the executor's update does not ask TE for the group",
        cause="thunder/executors/transformer_engineex_impl.py _te_fp8_amax_and_scale_update_impl all-reduces "
        "state.amax_history over _get_default_group() (since thunder PR #2404). A GPU bisect with TE 2.9.0: "
        "0.2.5.dev20250817 keeps the groups apart, 0.2.5.dev20250824 does not; before it the amaxes were not "
        "reduced across ranks at all (functional-amax-not-reduced-across-ranks, fixed in the same build)",
        seen=(_MATRIX_RUN, "docs/results/h200-te2.9.0-thunder0.2.6", "docs/results/h200-te2.12.0",
              "docs/results/h200-x2-te2.9.0-thunder0.2.6", "docs/results/h200-x4-te2.9.0-thunder0.2.6",
              _RELEASES_RUN_TE29_TENTH),
        bounds=(BisectedBound("thunder", ">=0.2.5.dev20250824", f"{_TENTH_BISECTS_TE29}/group-from/bisect.json"),),
    ),
    KnownDefect(
        id="ddp-transform-rejects-input-grad",
        summary="thunder's DDP transform raises on an input that requires grad: its gradient bucketing looks "
        "for an all-reduce behind the input's gradient too",
        executors=("legacy",),
        checks=("ddp-transform-matches-torch-ddp",),
        thunder=">=0.2.0.dev20240404,<0.2.4.dev20250608",
        te=">=1.6",
        without_te=True,
        failure=RaisedOnTheRanks,
        matches=_no_allreduce_behind_input_grad,
        signature="every rank raised ValueError '<CollectionProxy(...)> had an unexpected type' from "
        "get_bsym_of_allreduce_of_grad, called by optimize_allreduce_in_ddp_backward",
        cause="thunder/distributed/transforms/ddp.py optimize_allreduce_in_ddp_backward (called by "
        "torch_autograd.split_forward_backward, from mid-2024 by apply_bucketing_to_grad_allreduce) calls get_bsym_of_allreduce_of_grad on every "
        "tensor the backward trace returns, the input's gradient too; that one has no all-reduce behind it, so the "
        "walk up its producers' first arguments reaches the backward's C0/cotangents collection and check_type raises, "
        "before the bucket_size_in_mb <= 0 branch. Gone from 0.2.4.dev20250608, where thunder builds a joint "
        "forward-backward trace by default (thunder/__init__.py delay_trace_split=True, thunder PR #2102): the pass "
        "then buckets nothing (thunder's test_ddp_grad_bucketing became a strict xfail); the walk in ddp.py is "
        "unchanged through 0.2.6",
        seen=("docs/results/cpu-ddp-transform-2024", "docs/results/h200-te1.8.0-thunder0.2.0.dev20240728",
              "docs/results/cpu-bisect-ddp-transform"),
        bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", "docs/results/cpu-bisect-ddp-transform/fix/bisect.json"),),
    ),
    KnownDefect(
        id="legacy-executor-miscounts-te-2.9-saved-tensors",
        summary="thunder 0.2.2's and 0.2.3's legacy TE executor cannot unpack what TE 2.9's _Linear forward "
        "saves: every TE linear raises ValueError in the computation trace",
        executors=("legacy",),
        checks=_TE_RUNS + _LEGACY_SYNC,
        thunder=">=0.2.2.dev0,<=0.2.4.dev20250622",
        te=_SEEN_TE29,
        failure=(PartedFromEager, RanksFailed, ThunderRunRaised),
        matches=_legacy_unpack_at_te_linear,
        signature="every thunder-side error (a case's, a rank's, or the run's) is a ValueError 'too many values to "
        "unpack' or 'not enough values to unpack' at a te_linear_N call of the computation trace, and nothing "
        "else failed",
        cause="read in the wheels: the trace unpacks te_linear_N's result as (out, saved tensors, ctx) with as many "
        "saved tensors as its meta function names: a fixed tuple of 5 in 0.2.2; in 0.2.3 the count of an eager "
        "te.Linear(MIN_DIM, MIN_DIM) run once under the default recipe (_get_num_saved_tensors), 8 there. "
        "TELinear.forward returns what ctx.pop_saved_tensors() holds after the real _Linear.forward, another "
        "number with TE 2.9.0 (6 in 0.2.3's cases), so `(out, (t..), ctx) = te_linear_0(...)` raises. Both builds "
        "set input_quantizer.internal = False in TELinear._get_quantizers, which 0.2.4 changed to True, and 0.2.4's "
        "legacy executor runs on TE 2.9.0; that this change is the fix was not shown. Seen with TE 2.9.0 only. The legacy "
        "sync scenarios' ranks raise it too (bwd-sync-*, fwd-has-no-sync: seen at 363ddd5). A GPU bisect of the fix: "
        "0.2.4.dev20250608 .. 0.2.4.dev20250622 still show it, 0.2.4 does not (PEP 440 keeps 0.2.4's dev builds out of "
        "`<0.2.4`, hence the bound by build). Where it starts: the GPU bisect from 0.2.1 finds 0.2.2.dev0 (the first "
        "build after 0.2.1 on the index) bad and 0.2.1 hiding it behind another failure of its own (its thunder "
        "side raises otherwise: bisects/miscount-from), so the range starts at the first build that can show it",
        seen=(_VERSIONS_RUN_TE29, _RELEASES_RUN_TE29, _RELEASES_RUN_TE29_NINTH, _RELEASES_RUN_TE29_TENTH),
        bounds=(BisectedBound("thunder", "<=0.2.4.dev20250622", f"{_ENTRY_BISECTS_TE29}/miscount-fix/bisect.json"),),
    ),
    KnownDefect(
        id="fsdp-transform-layer-bucketing-rejects-input-grad",
        summary="thunder's FSDP transform with LAYER bucketing raises on an input that requires grad: its "
        "reduce-scatter bucketing looks for a parameter behind the input's gradient too",
        executors=(None,),
        checks=("fsdp-transform-matches-torch-fsdp[zero2-layer]", "fsdp-transform-matches-torch-fsdp[zero3-layer]"),
        thunder=">=0.2.0.dev20240404,<0.2.4.dev20250608",
        te=">=1.6",
        without_te=True,
        failure=RaisedOnTheRanks,
        matches=_no_bucket_for_the_input_grad,
        signature="every rank raised RuntimeError 'Invalid index=0, ...' from create_map_from_unsharded_grad_to_bucket, "
        "called by _apply_bucketing_to_backward_reduce_scatter",
        cause="thunder/distributed/transforms/fsdp.py create_map_from_unsharded_grad_to_bucket (called by "
        "split_forward_backward through apply_bucketing_to_backward_trace) checks that every tensor the backward "
        "trace returns is a bucketed parameter's gradient; the input's gradient, output 0, is none, so "
        "utils.check raises 'Invalid index=0'. Without bucketing (NONE) both shardings pass. Seen from the first "
        "build on the index, 0.2.0.dev20240404 (torch 2.4.1), to 0.2.4.dev20250601 (torch 2.11.0); gone from "
        "0.2.4.dev20250608, the build where thunder's DDP bucketing stopped raising on an input's gradient too "
        "(ddp-transform-rejects-input-grad): the CPU bisect found the boundary, the source of the fix was not read",
        seen=(_FSDP_LAYER_BISECT, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29),
        bounds=(BisectedBound("thunder", "<0.2.4.dev20250608", f"{_FSDP_LAYER_BISECT}/fix/bisect.json"),),
    ),
    KnownDefect(
        id="legacy-backward-sync-dropped-by-delayed-split",
        summary="the legacy TE executor's backward FP8 sync is missing from the backward trace and never runs: "
        "thunder's new default trace split bypasses the function that inserts it",
        executors=("legacy",),
        checks=("bwd-sync-placement", "bwd-sync-runs-once"),
        thunder=">=0.2.4.dev20250608,<=0.2.4.dev20250622",
        te=">=1.6",
        without_te=True,
        failure=(TraceInvariantBroken, SyncCountWrong),
        matches=_no_backward_sync_at_all,
        signature="every rank's backward trace breaks backward-sync-count with none found, and nothing else, "
        "or every rank ran no backward sync at any step",
        cause="read in the wheels: 0.2.4.dev20250608 made thunder.jit's delay_trace_split default True "
        "(thunder/__init__.py: grad_transform_on_trace, then split_into_forward_and_backward in "
        "thunder/transforms/autodiff.py), so torch_autograd.split_forward_backward, the only caller of "
        "transformer_engineex._transformer_engine_bwd_fp8_meta_sync, no longer runs; 0.2.4 calls "
        "transformer_engine_v1_bwd_fp8_meta_sync from autodiff.py too (the next build on the index; the range ends at the last "
        "bad one, since PEP 440 orders 0.2.4's dev builds below 0.2.4). The same change ended "
        "ddp-transform-rejects-input-grad. Seen on the CPU (the sync counted by teparity's recorder); that a GPU "
        "run with TE shows it too follows from the code read, not from a run",
        seen=(_SYNC_SPLIT_BISECT, _CPU_BUILDS_RUN),
        bounds=(BisectedBound("thunder", ">=0.2.4.dev20250608", f"{_SYNC_SPLIT_BISECT}/introduced/bisect.json"),
                BisectedBound("thunder", "<=0.2.4.dev20250622", f"{_SYNC_SPLIT_BISECT}/fix/bisect.json")),
    ),
    KnownDefect(
        id="no-grad-forward-left-to-torch",
        summary="under torch.no_grad neither TE executor claims a linear: thunder runs the inference forward in torch",
        executors=("legacy", "functional"),
        checks=("inference",),
        thunder=">=0.2.0.dev20240609,<0.2.8",
        te=">=1.6,<2.21",
        failure=SilentFallback,
        matches=_no_grad_left_to_torch,
        signature="no linear is held by TE, and the executor's TE imports did not fail",
        cause="both executors register TE for prims.linear only (transformer_engineex_impl.py and transformer_engine_v1ex.py "
        "register_implementation(linear_prim / prims.linear, ...)); with grad enabled thunder's autodiff decomposes "
        "torch.nn.functional.linear to prims.linear and the grad transform takes it, but a no-grad trace keeps "
        "ltorch.linear, which the torch executor claims whole, so TE never sees the prim. Run on thunder 0.2.6 and "
        "0.2.7.dev20260201 with TE 2.20.2 (functional; 0.2.6's legacy executor has no TE there); the rest of the range "
        "is read, not run: the same prims.linear-only registration in every build from 0.2.0.dev20240609",
        seen=(_FEATURES_RUN,),
    ),
    KnownDefect(
        id="functional-new-recipe-object-resets-fp8-state",
        summary="thunder's functional TE executor starts a new FP8 state whenever the recipe object changes, where "
        "eager TE keeps each module's state across DelayedScaling recipes",
        executors=("functional",),
        checks=("recipe-change",),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        failure=PartedFromEager,
        matches=_state_restarts_each_step,
        signature="no case raised; step 0 matches, the first difference is at step 1; thunder's amax history holds "
        "one forward pass at every step while eager TE's grows",
        cause="thunder/executors/transformer_engineex_impl.py TERecipeState.__call__ keeps its state only while "
        "`self.parent_recipe is recipe` and otherwise creates a new RecipeState (transformer_engine_v2ex_impl.py the "
        "same in 0.2.3-0.2.5); eager TE (module/base.py init_fp8_metadata, set_meta_tensor) does nothing for an "
        "equal recipe and, for another DelayedScaling recipe, keeps the state and adjusts its amax history length. "
        "A loop that builds its recipe inline (te.autocast(recipe=DelayedScaling())) never accumulates an amax history",
        seen=(_FEATURES_RUN,),
    ),
    KnownDefect(
        id="autocast-quantizes-bf16-copies",
        summary="under torch.autocast thunder casts the fp32 input and weight to bfloat16 before TE quantizes them, "
        "where eager TE quantizes the fp32 tensors: the FP8 values differ by double rounding",
        executors=("legacy", "functional"),
        checks=("torch-autocast",),
        thunder=">=0.2.3,<0.2.8",
        te=">=2.9,<2.21",
        failure=PartedFromEager,
        matches=_bf16_copies_quantized,
        signature="no case raised; the first linear's step-0 input and weight amaxes on the thunder side are eager "
        "TE's rounded to bfloat16, at least one of them different from eager's",
        cause="thunder/transforms/autocast.py _linear_autocast_impl downcasts a, w (and bias) with maybe_downcast_to "
        "before prims.linear, which the TE executor then takes (the legacy one runs TE's _Linear on those copies); "
        "eager te.Linear (module/linear.py _Linear.forward) quantizes the fp32 input and parameter with their "
        "quantizers and casts for AMP only without FP8. A value near an E4M3 rounding midpoint rounds to another "
        "E4M3 value, and the E5M2 gradients carry that beyond TE's own tolerances from step 0 (seen: 4 of 256 outputs "
        "and 88 of 2048 weight-gradient entries of the first linear outside them, both executors alike)",
        seen=(_FEATURES_RUN, _FEATURES_RUN_TE29, _VERSIONS_RUN_TE29, _RELEASES_RUN_TE29),
    ),
    KnownDefect(
        id="legacy-checkpointing-records-amax-twice",
        summary="with the legacy TE executor, a linear under activation checkpointing records its amaxes again when "
        "the backward recomputes it, after the step's update: its FP8 state and gradients part from eager TE's",
        executors=("legacy",),
        checks=("activation-checkpointing",),
        thunder=">=0.2.4,<0.2.7",
        te=">=2.9,<2.10",
        failure=PartedFromEager,
        matches=_recompute_records_amax_again,
        signature="no case raised; under activation checkpointing, after step 0 thunder's first (recomputed) linear "
        "holds a non-zero input amax in row 0 of its history, the row TE's update zeroes, where eager TE's is zero",
        cause="seen, not read in source: the legacy executor's te_linear_N is a TELinear module whose forward "
        "(transformer_engine_v1ex.py) records the input and weight amaxes in its fp8_meta; thunder's checkpointing "
        "runs the checkpointed te_linear_N again in the backward program, after the forward's amax reduction and "
        "update, so the recomputation writes its amaxes into the slot the update had cleared (3.47 where eager TE "
        "holds 0) and quantizes with the state as it then is: gradients part from step 0. The functional executor "
        "has its own checkpointing transform (0.2.5+), which keeps one update per state; the legacy one has none. "
        "Seen on 0.2.4, 0.2.5 and 0.2.6 with TE 2.9.0 (from TE 2.10 the legacy executor has no TE). The lower bound is the "
        "first build whose legacy executor runs on TE 2.9.0 at all: a GPU bisect found every build from 0.2.3 to "
        "0.2.4.dev20250622 raising legacy-executor-miscounts-te-2.9-saved-tensors first, and 0.2.4 showing this",
        seen=(_FEATURES_RUN_TE29, "docs/results/h200-te2.9.0-features/call4-82bfe86", _VERSIONS_RUN_TE29,
              f"{_ENTRY_BISECTS_TE29}/ckpt-twice-from"),
    ),
    KnownDefect(
        id="functional-amax-not-reduced-across-ranks",
        summary="before thunder 0.2.5.dev20250824 the functional TE executor does not all-reduce amaxes across data-parallel "
        "ranks: each rank's FP8 scales follow its own data",
        executors=("functional",),
        checks=("ddp", "ddp-first-step", "ddp-llama"),
        thunder=">=0.2.3,<=0.2.5.dev20250817",
        te=_SEEN_TE29,
        failure=PartedFromEager,
        matches=_ranks_part_unreduced,
        signature="no case raised, and the ranks' thunder FP8 states differ from one another",
        cause="transformer_engine_v2ex_impl.py (0.2.3, 0.2.4) updates each recipe state from its own amax history; "
        "the all-reduce of state.amax_history over the default group came with thunder PR #2404 (0.2.5), the one "
        "that teparity's mutant functional-no-cross-rank-reduction removes. Eager TE reduces amaxes over the "
        "fp8_autocast group. Seen on 0.2.3, 0.2.4 and the weekly builds 0.2.5.dev20250803 .. 0.2.5.dev20250817 with TE "
        "2.9.0. A GPU fix bisect: 0.2.5.dev20250817 is the last build with it, 0.2.5.dev20250824 the first without, "
        "the build where functional-fp8-group-ignored starts (the all-reduce over the default group)",
        seen=(_VERSIONS_RUN_TE29, "docs/results/h200-te2.9.0-features/call4-82bfe86", _RELEASES_RUN_TE29_NINTH,
              _FIX_BISECTS_TE29, _RELEASES_RUN_TE29_TENTH),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250817", f"{_TENTH_BISECTS_TE29}/unreduced-fix/bisect.json"),),
    ),
    KnownDefect(
        id="functional-checkpointing-saves-te-linears",
        summary="up to thunder 0.2.5.dev20250629 thunder.jit under activation checkpointing recomputes none of the functional "
        "executor's TE linears: the checkpointed region keeps its activations",
        executors=("functional",),
        checks=("activation-checkpointing",),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        failure=TraceInvariantBroken,
        matches=_checkpointed_linears_not_recomputed,
        signature="the only broken trace invariant is recomputed-te-linears, with no forward TE linear recomputed in "
        "the backward trace",
        cause="seen, not read in source: on 0.2.3, 0.2.4 and 0.2.5.dev20250629 (TE 2.9.0) the backward trace of a "
        "torch.utils.checkpoint region holds no te_functional_linear_fwd, so the region's TE linears are saved, not "
        "recomputed. 0.2.5.dev20250706 .. 0.2.5.dev20250803 recompute them, and show "
        "functional-checkpointing-updates-fp8-state-twice instead; the executor's own checkpointing transform "
        "ships in 0.2.5.dev20250810 (docs/results/wheels-functional-checkpointing-transform), clean on the GPU. "
        "A GPU fix bisect (bisects/ckpt-saves-fix) was cut off, every build it ran between 0.2.4 and 0.2.5.dev20250810 "
        "hidden by that other defect; 0.2.5.dev20250629 showed this one as a near miss in bisects/twice-from",
        seen=(_VERSIONS_RUN_TE29, "docs/results/h200-te2.9.0-features/call4-82bfe86", _RELEASES_RUN_TE29_TENTH),
    ),
    KnownDefect(
        id="functional-thunderfx-checkpointing-backward-unbound",
        summary="up to thunder 0.2.5.dev20250629 a checkpointed region compiled with thunderfx fails in its backward: the "
        "backward reads a forward tensor (a TE linear's output, an activation's input) that it never computes",
        executors=("functional",),
        checks=("activation-checkpointing",),
        thunder=">=0.2.3,<=0.2.5.dev20250629",
        te=_SEEN_TE29,
        failure=PartedFromEager,
        matches=_recompute_reads_an_unbound_forward_tensor,
        signature="under activation checkpointing compiled with thunderfx, every case error is the thunder side's "
        "UnboundLocalError in backward_fn, at least one of them at a te_functional_linear_bwd call",
        cause="seen, not read in source: thunder.backward_fn passes te_functional_linear_bwd a quantized forward "
        "tensor (t29 on 0.2.3, t30 on 0.2.4) that no line of the backward defines, and in the case with a GELU "
        "between the linears reads the activation's forward input (t69, at a torch.mul) that it never recomputes; "
        "the functional executor's checkpointing transform (first in 0.2.5.dev20250810: docs/results/wheels-"
        "functional-checkpointing-transform) is absent. A GPU fix bisect (bisects/thunderfx-fix) was cut off: "
        "0.2.5.dev20250810 is clean, 0.2.5.dev20250706 .. 0.2.5.dev20250803 show "
        "functional-checkpointing-updates-fp8-state-twice instead; the gate on 0.2.5.dev20250629 failed both thunderfx "
        "cases as near misses of this entry (h200-te2.9.0-tenth/call2-db1ecfc), so the range ends there",
        seen=(_VERSIONS_RUN_TE29, "docs/results/h200-te2.9.0-features/call4-82bfe86", _RELEASES_RUN_TE29,
              _RELEASES_RUN_TE29_TENTH, _WEEKLIES_RUN_TE29_TENTH),
    ),
    KnownDefect(
        id="functional-checkpointing-updates-fp8-state-twice",
        summary="on the weekly builds 0.2.5.dev20250706 .. 0.2.5.dev20250803, under activation checkpointing, the backward's recomputation "
        "updates a forward FP8 state the forward already updated that step",
        executors=("functional",),
        checks=("activation-checkpointing",),
        thunder=">=0.2.5.dev20250706,<=0.2.5.dev20250803",
        te=_SEEN_TE29,
        failure=TraceInvariantBroken,
        matches=_recompute_updates_the_forward_state_again,
        signature="every broken trace invariant is one-update-per-fp8-state, each state it names updated once in a "
        "forward trace and once in a backward trace",
        cause="seen, not read in source: the backward trace of a checkpointed region updates (te_fp8_amax_and_scale_update) "
        "the FP8 states that the forward trace created and updated, where eager TE updates each state once a step; "
        "both thunder.jit and thunderfx, both recipes. The executor's _te_activation_checkpointing_transform first "
        "ships in 0.2.5.dev20250810 (read in the wheels: docs/results/wheels-functional-checkpointing-transform), "
        "and a GPU fix bisect found that build clean. Where it starts (GPU, TE 2.9.0, bisects/twice-from): "
        "0.2.5.dev20250706 is the first build with it; 0.2.5.dev20250629 still recomputes no TE linear (a near miss "
        "of functional-checkpointing-saves-te-linears), so it cannot update a state twice, and 0.2.4 has that defect "
        "in its range; the bisect log ends without a boundary for that reason",
        seen=(_RELEASES_RUN_TE29_NINTH, _FIX_BISECTS_TE29, _RELEASES_RUN_TE29_TENTH),
        bounds=(BisectedBound("thunder", "<=0.2.5.dev20250803", f"{_FIX_BISECTS_TE29}/twice-last.json"),),
    ),
)

_SEEN_TYPES: dict[str, type[KnownDefectSeen]] = {
    entry.id: type(f"KnownDefect_{entry.id.replace('-', '_').replace('.', '_')}", (KnownDefectSeen,), {"entry_id": entry.id})
    for entry in REGISTRY
}
BY_ID = {entry.id: entry for entry in REGISTRY}


def covering(check: str, executor: str | None, versions: Versions) -> list[KnownDefect]:
    """The entries that cover this check and executor on these versions."""
    return [entry for entry in REGISTRY if entry.holds_for(check, executor, versions)]


def match(entries: list[KnownDefect], error: BaseException, env: Environment) -> KnownDefect | None:
    """The entry whose signature ``error`` matches (its failure type and its evidence predicate), or None."""
    for entry in entries:
        if isinstance(error, entry.failure) and entry.matches(error.evidence, env):
            return entry
    return None


def near_misses(check: str, executor: str | None, versions: Versions, error: BaseException, env: Environment) -> list[KnownDefect]:
    """The entries of this check and executor whose signature ``error`` matches although their version
    ranges leave this stack out."""
    near = [e for e in REGISTRY if e.names(check, executor) and not e.holds_for_versions(versions)]
    return [e for e in near if match([e], error, env) is e]


def near_miss_message(entry: KnownDefect, versions: Versions, nodeid: str) -> str:
    """What a near miss says: the entry, the range that excludes this stack, the bisect that settles it."""
    thunder_out = not _within(versions.thunder, entry.thunder)
    package, version = ("lightning-thunder", versions.thunder) if thunder_out else ("transformer-engine", versions.transformer_engine)
    wheels = "" if thunder_out else " --wheels DIR"
    return (
        f"[near miss of known upstream defect {entry.id}: this failure matches its signature, but "
        f"{'; '.join(entry.excluded(versions))}, so it fails strict. If it is the same defect, bisect where it "
        f"starts: python -m teparity bisect --entry {entry.id} --package {package}{wheels} --good GOOD_BUILD --bad {version} -- "
        f"'{nodeid}' -p no:xdist; then name the bound by that build in {entry.id}'s range]"
    )


def markdown() -> str:
    """The registry as a document (docs/known-defects.md is this, generated)."""
    lines = [
        "# Known upstream defects",
        "",
        "Generated by `python -m teparity known-defects` from `src/teparity/gate/known_defects.py`. A test that an",
        "entry covers (its checks and executors, on thunder and TE versions inside both ranges) is a strict",
        "xfail that expects only the entry's signature: the failure type that the judging code raises, and a",
        "predicate over that failure's evidence. Any other failure of that test fails; a pass (XPASS) fails",
        "too and names the entry to retire; outside the ranges the test runs strict. `pytest --runxfail`",
        "runs every covered test as a plain one.",
    ]
    for entry in REGISTRY:
        lines += [
            "",
            f"## `{entry.id}`",
            "",
            entry.summary[0].upper() + entry.summary[1:] + ".",
            "",
            f"- checks: {', '.join(f'`{c}`' for c in entry.checks)}; executors: "
            f"{', '.join(e or 'none (the check runs no TE executor)' for e in entry.executors)}",
            f"- thunder `{entry.thunder}`, TransformerEngine {entry.te_range()}",
            f"- signature: `{entry.failure_names()}` where {entry.signature}",
            f"- cause: {entry.cause}",
            f"- seen: {', '.join(f'`{path}`' for path in entry.seen)}",
            *([f"- bounds bisected: {', '.join(f'{b.package} `{b.bound}` (`{b.log}`)' for b in entry.bounds)}"] if entry.bounds else []),
        ]
    return "\n".join(lines) + "\n"
