"""The gate's checks, by name: each is a row of the parity report (a test marks it with
``@pytest.mark.check(NAME)``, or ``@pytest.mark.check(NAME, "{param}-...")`` for a row per parametrization, the
format filled from the test's parameters: ``numerics[delayed]``), what the known-defect registry's entries cover,
and a column of the compatibility matrix (``GROUPS``)."""

from __future__ import annotations

import dataclasses

#: The compatibility matrix's shared columns, in their order (a check not in one has a column of its own, after them).
COLUMNS = ("backward sync", "TE claims", "trace invariants", "numerics", "fp32 + bias", "ddp", "grad accumulation",
           "fp8 groups", "ddp transform")


@dataclasses.dataclass(frozen=True)
class Check:
    """A check and what the registry and the matrix need to know of it, said where it is defined."""

    name: str
    #: Its tests run TE linears (an FP8 GPU's; the registry's "executor loses TE" entries cover it).
    runs_te: bool = False
    #: Its column of the compatibility matrix (one of ``COLUMNS``); None: a column of its own.
    column: str | None = None
    #: It trains the llama block (what thunder does to its attention and fusions, it does in each of them).
    llama: bool = False


#: Every check by name, in the order the tiers run them.
REGISTRY: dict[str, Check] = {}


def _check(name: str, **properties: object) -> str:
    check = Check(name, **properties)  # type: ignore[arg-type]
    if check.column is not None and check.column not in COLUMNS:
        raise ValueError(f"check {name}: column {check.column!r} is not one of {COLUMNS}")
    REGISTRY[name] = check
    return name


# -- trace tier: the legacy executor's backward FP8 sync, thunder's DDP and FSDP transforms, thunderfx --------
BWD_SYNC_PLACEMENT = _check("bwd-sync-placement", column="backward sync")
BWD_SYNC_RUNS_ONCE = _check("bwd-sync-runs-once", column="backward sync")
FWD_HAS_NO_SYNC = _check("fwd-has-no-sync", column="backward sync")
TE_CLAIMS_EVERY_LINEAR = _check("te-claims-every-linear", runs_te=True, column="TE claims")
TE_TRACE_INVARIANTS = _check("te-trace-invariants", runs_te=True, column="trace invariants")
DDP_TRANSFORM = _check("ddp-transform-matches-torch-ddp", column="ddp transform")
FSDP_TRANSFORM = _check("fsdp-transform-matches-torch-fsdp")
THUNDERFX_TRANSFORM = _check("thunderfx-matches-torch")
# -- numerics tier -----------------------------------------------------------------------------------------
NUMERICS = _check("numerics", runs_te=True, column="numerics")
NUMERICS_FP32_BIAS = _check("numerics-fp32-bias", runs_te=True, column="fp32 + bias")
# -- features tier -----------------------------------------------------------------------------------------
ACTIVATION_CHECKPOINTING = _check("activation-checkpointing", runs_te=True)
THUNDERFX = _check("thunderfx", runs_te=True)
RECIPE_CHANGE = _check("recipe-change", runs_te=True)
INFERENCE = _check("inference", runs_te=True)
TORCH_AUTOCAST = _check("torch-autocast", runs_te=True)
LLAMA_BLOCK = _check("llama-block", runs_te=True, llama=True)
CHECKPOINT_RESUME = _check("checkpoint-resume", runs_te=True)
NEW_INPUT_SHAPE = _check("new-input-shape", runs_te=True)
FROZEN_BASE_ADAPTER = _check("frozen-base-adapter", runs_te=True)
LINEAR_CALLED_TWICE = _check("linear-called-twice", runs_te=True)
INFERENCE_8BIT = _check("inference-8bit", runs_te=True)
FP8_SWITCHED = _check("fp8-switched", runs_te=True)
FP8_OFF_ENDS = _check("fp8-off-ends", runs_te=True)
CUDA_GRAPHS = _check("cuda-graphs", runs_te=True)
TE_MODULES = _check("te-modules", runs_te=True)
# -- ddp tier ----------------------------------------------------------------------------------------------
DDP = _check("ddp", runs_te=True, column="ddp")
DDP_FIRST_STEP = _check("ddp-first-step", runs_te=True, column="ddp")
DDP_FP8_SWITCHED = _check("ddp-fp8-switched", runs_te=True, column="ddp")
DDP_GRAD_ACCUMULATION = _check("ddp-grad-accumulation", runs_te=True, column="grad accumulation")
DDP_FP8_GROUP_PER_RANK = _check("ddp-fp8-group-per-rank", runs_te=True, column="fp8 groups")
DDP_FP8_GROUP_SUBGROUPS_OF_2 = _check("ddp-fp8-group-subgroups-of-2", runs_te=True, column="fp8 groups")
DDP_LLAMA = _check("ddp-llama", runs_te=True, llama=True)
DDP_LLAMA_GRAD_ACCUMULATION = _check("ddp-llama-grad-accumulation", runs_te=True, llama=True)
DDP_THUNDERFX = _check("ddp-thunderfx", runs_te=True)
# -- fsdp tier ---------------------------------------------------------------------------------------------
FSDP = _check("fsdp", runs_te=True)
FSDP_LLAMA = _check("fsdp-llama", runs_te=True, llama=True)
FSDP_GRAD_ACCUMULATION = _check("fsdp-grad-accumulation", runs_te=True)
FSDP2_THUNDERFX = _check("fsdp2-thunderfx", runs_te=True)
FSDP_ACTIVATION_CHECKPOINTING = _check("fsdp-activation-checkpointing", runs_te=True)

#: Every check, in the order the tiers run them.
ALL = tuple(REGISTRY)
#: The checks that run the legacy executor's TE linears where TE is installed (the legacy sync scenarios).
LEGACY_SYNC = (BWD_SYNC_PLACEMENT, BWD_SYNC_RUNS_ONCE, FWD_HAS_NO_SYNC)
#: Every check that needs TE to run a linear.
TE_RUNS = tuple(name for name, check in REGISTRY.items() if check.runs_te)
FP8_GROUPS = tuple(name for name, check in REGISTRY.items() if check.column == "fp8 groups")
#: Every check that trains the llama block.
LLAMA_RUNS = tuple(name for name, check in REGISTRY.items() if check.llama)
#: The compatibility matrix's column of a check, in ``COLUMNS`` order (the checks not named here have a column of their
#: own).
GROUPS: dict[str, str] = dict(sorted(((name, check.column) for name, check in REGISTRY.items() if check.column),
                                     key=lambda pair: COLUMNS.index(pair[1])))


def row(check: str, parameters: str | None = None) -> str:
    """A report row: the check, and its parameter part where it has one (``numerics[delayed]``)."""
    return f"{check}[{parameters}]" if parameters else check


def base(row_name: str) -> str:
    """The check of a report row."""
    return row_name.split("[", 1)[0]


#: A pattern's parameter part that names every parametrization of its check (``fsdp[*]``).
EVERY_PARAMETRIZATION = "*"


def matches(pattern: str, row_name: str) -> bool:
    """Whether report row ``row_name`` is one that ``pattern`` names: ``check[*]`` every parametrization of the
    check; a bare ``check`` its row or any parametrization of it; ``check[params]`` that row alone. No other
    character is a wildcard (``[*]`` is no character class). The one rule for the mutations' ``killed_by``, the
    registry's entries and ``--teparity-rows``."""
    if "[" not in pattern:
        return base(row_name) == pattern
    if pattern == row(base(pattern), EVERY_PARAMETRIZATION):
        return row_name.startswith(f"{base(pattern)}[")
    return row_name == pattern


def patterns(text: str) -> tuple[str, ...]:
    """Comma-separated row patterns (``matches``); ValueError naming a pattern of no registered check."""
    found = tuple(part.strip() for part in text.split(","))
    for pattern in found:
        check, bracket, parameters = pattern.partition("[")
        malformed = bracket and not (len(parameters) > 1 and parameters.endswith("]") and "[" not in parameters
                                     and "]" not in parameters[:-1])
        if check not in REGISTRY or malformed:
            raise ValueError(f"{pattern!r} names no check (a pattern is CHECK, CHECK[*] or CHECK[PARAMETERS]); the "
                             f"checks: {', '.join(REGISTRY)}")
    return found
