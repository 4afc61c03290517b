"""What is installed and what it supports: torch, thunder and TE versions, thunder's TE executors, GPUs.

Every version difference of thunder's TE executors is decided here, so that tests read the same on
every build. Each "cannot" carries a reason string that skips reuse verbatim.

Executors, by thunder release (docs/facts.md):

==========================  ==============================================  ==================================
thunder                     legacy (module-based, backward-sync symbol)     functional (per-linear amax update)
==========================  ==============================================  ==================================
0.1.0 .. 0.2.5              ``transformer_engineex.transformer_engine_ex``  0.2.3 .. 0.2.5: opt-in
                                                                            ``transformer_engine_v2ex``
0.2.6                       ``transformer_engine_v1ex``                     ``transformer_engineex`` (default)
0.2.7.dev20251130 on        removed (thunder PR #2762)                      ``transformer_engineex``
==========================  ==============================================  ==================================

The modules are found by probing in that order and recognized by what they define (``TELinear`` for
the legacy executor, a ``TransformerEngineTransform*`` class for the functional one), so weekly builds
between releases are handled without a table of dates.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from teparity.stack.te_gates import gate_for

ExecutorKind = Literal["legacy", "functional"]
EXECUTOR_KINDS: tuple[ExecutorKind, ...] = ("legacy", "functional")

#: Name and id of the legacy executor's backward FP8 sync symbol.
BACKWARD_SYNC_SYMBOL = "te_sync_fp8_meta_bwd"
#: Symbols that show a TE executor ran a linear, in the forward and backward execution traces.
TE_FORWARD_LINEAR_PREFIX: dict[str, str] = {"legacy": "te_linear_", "functional": "te_functional_linear_fwd"}
TE_BACKWARD_LINEAR_PREFIX: dict[str, str] = {
    "legacy": "te_functional_linear_backward",
    "functional": "te_functional_linear_bwd",
}
#: The functional executor's per-linear amax/scale update and its run-time recipe lookup.
FUNCTIONAL_UPDATE_SYMBOL = "te_fp8_amax_and_scale_update"
FUNCTIONAL_RECIPE_PREFIX = "get_te_fp8_recipe"
#: The legacy executor's module-level helper that inserts the sync into the backward trace.
SYNC_INSERTION_HELPER = "_insert_bwd_fp8_meta_sync"

# (module, executor attribute, marker attribute) in probing order.
_LEGACY_CANDIDATES = (
    ("thunder.executors.transformer_engine_v1ex", "transformer_engine_v1_ex", "TELinear"),
    ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TELinear"),
)
_FUNCTIONAL_CANDIDATES = (
    ("thunder.executors.transformer_engineex", "transformer_engine_ex", "TransformerEngineTransform"),
    ("thunder.executors.transformer_engine_v2ex", "transformer_engine_v2_ex", "TransformerEngineTransformV2"),
)
_WHY_ABSENT = {
    "legacy": "the legacy TE executor was removed in 0.2.7.dev20251130 (thunder PR #2762)",
    "functional": "the functional TE executor first shipped in 0.2.3 (transformer_engine_v2ex)",
}

FP8_MIN_CAPABILITY = (8, 9)
#: thunder PR #873 ("DDP as a transform", 2024-08-04) made ``ddp(jit(model))`` the form; builds before it
#: only take ``jit(ddp(model))`` (``ddp(jit(...))`` fails there with "None had an unexpected type"). The
#: first weekly build that takes it is 0.2.0.dev20240811: on dev20240804 ``ddp(jit(model))`` still fails
#: ("None had an unexpected type <class 'NoneType'>. Supported types are ProcessGroup") and
#: ``jit(ddp(model))`` runs (seen on the CPU: docs/results/cpu-ddp-transform-2024/).
DDP_OF_JITTED_SINCE = Version("0.2.0.dev20240811")
#: The first build whose DDP transform takes an input that requires grad: the last that raises is
#: 0.2.4.dev20250601 (bisected on the CPU, docs/results/cpu-ddp-transform-2024/bisect.jsonl).
DDP_INPUT_GRAD_SINCE = Version("0.2.4.dev20250608")


def ddp_input_grad_reason(thunder: str | None) -> str | None:
    """Why thunder ``thunder``'s DDP transform cannot take an input that requires grad, or None.

    Before ``DDP_INPUT_GRAD_SINCE`` its gradient bucketing (``thunder/distributed/transforms/ddp.py``,
    ``optimize_allreduce_in_ddp_backward``) looks for an all-reduce behind every tensor the backward
    returns, the input's gradient too, and raises ``ValueError: <CollectionProxy ...> had an unexpected
    type`` in ``get_bsym_of_allreduce_of_grad``, whatever ``bucket_size_in_mb`` (docs/facts.md). There the
    ddp tier's inputs do not require grad; the known defect ``ddp-transform-rejects-input-grad`` covers
    the check that insists (``ddp-transform-matches-torch-ddp``).
    """
    version = parse_version(thunder or "")
    if version is None or version >= DDP_INPUT_GRAD_SINCE:
        return None
    return (
        f"lightning-thunder {thunder}'s DDP transform raises on an input that requires grad (fixed in "
        f"{DDP_INPUT_GRAD_SINCE}): the inputs do not require grad and input gradients are not compared"
    )


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` without importing it (None when absent)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None



#: What a fork server imports after torch and TE where a forked child still runs CUDA after them: torch's
#: compiler. TE compiles its Python FP8 scale update with ``torch.compile`` (``jit_fuser``), so every rank's
#: first FP8 step would import inductor itself; thunder is not among them (see ``fork_stages``).
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.runtime.triton_heuristics")


def fork_stages() -> tuple[tuple[str, ...], ...]:
    """What a fork server may import before it forks ranks, in stages: each stage adds to the ones before,
    and the environment probe keeps the most stages after which a forked child still runs CUDA
    (``envprobe.fork_check``). torch and ``transformer_engine.pytorch`` leave fork usable. torch's compiler
    (``COMPILER_MODULES``) does only under the NVML-based CUDA check: its import calls
    ``torch.cuda.is_available()``, which otherwise asks the CUDA runtime (tenth session: "Cannot re-initialize
    CUDA in forked subprocess"), so teparity sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` for its ranks
    (``teparity.launch.rank_env``). thunder's import does not leave fork usable where TE is installed, even
    with that check (seen on the H200: 0.2.6 initialises torch's CUDA, 0.2.7.dev20260201 the driver;
    docs/facts.md, ninth session), so each rank imports thunder itself. Without TE nothing in a rank uses a
    GPU: torch and thunder."""
    if installed_version("transformer_engine") is None:
        return (("torch", "thunder"),)
    return (("torch", "transformer_engine.pytorch"), COMPILER_MODULES)


@dataclasses.dataclass(frozen=True)
class Versions:
    """Versions of the systems under test, read from package metadata (no import, no CUDA)."""

    torch: str | None
    thunder: str | None
    transformer_engine: str | None

    @classmethod
    def installed(cls) -> Versions:
        return cls(
            torch=installed_version("torch"),
            thunder=installed_version("lightning-thunder"),
            transformer_engine=installed_version("transformer_engine"),
        )

    def describe(self) -> str:
        return (
            f"torch {self.torch or 'absent'}, lightning-thunder {self.thunder or 'absent'}, "
            f"TransformerEngine {self.transformer_engine or 'absent'}"
        )


@dataclasses.dataclass(frozen=True)
class ExecutorInfo:
    """One of thunder's TE executors as found in the installed thunder (plain data: travels as JSON)."""

    kind: ExecutorKind
    module: str | None = None
    attribute: str | None = None
    #: The transform class the functional executor needs (``thunder.jit(transforms=[...])``).
    transform: str | None = None
    #: Whether the executor object exists (the functional one is None without TE).
    executor_present: bool = False
    #: Legacy only: whether this build has the backward-sync symbol and its insertion helper.
    has_backward_sync: bool = False
    #: Why this thunder has no such executor at all (None when the module was found).
    missing_reason: str | None = None
    #: Legacy only, TE installed: why the module's own TE imports failed (its ``TE_AVAILABLE`` is False,
    #: so its checker declines every linear: a silent fallback the TE-claims checks report), or None.
    te_imports_failed: str | None = None
    #: Legacy only: the module flag that must be true for this build to insert its backward sync, where
    #: it is false here (0.2.0.dev20240513 .. dev20240602 insert it only ``if TE_VERSION_1_6_PLUS``, i.e.
    #: with TE > 1.6, and reorder the TE linears otherwise), or None.
    backward_sync_gate_off: str | None = None
    #: Whether the executor reduces amaxes within ``fp8_autocast(fp8_group=...)`` (read in its source:
    #: legacy, its autocast wrapper passes a group; functional, its update asks TE for the group).
    honors_fp8_group: bool = False

    @property
    def found(self) -> bool:
        return self.module is not None

    def label(self) -> str:
        if not self.found:
            return f"{self.kind}: none ({self.missing_reason})"
        where = f"{self.module}.{self.attribute}"
        state = "" if self.executor_present else " [executor is None: TE not importable]"
        sync = f", {BACKWARD_SYNC_SYMBOL}" if self.has_backward_sync else ""
        failed = f" [TE_AVAILABLE is False: {self.te_imports_failed}]" if self.te_imports_failed else ""
        return f"{self.kind}: {where}{sync}{state}{failed}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _import_optional(module_name: str) -> Any | None:
    try:
        return importlib.import_module(module_name)
    except ImportError:
        return None


def find_te_executors() -> dict[ExecutorKind, ExecutorInfo]:
    """Locate thunder's TE executors by importing thunder (call in a probe or a rank, not in plugin import)."""
    thunder_version = installed_version("lightning-thunder")
    found: dict[ExecutorKind, ExecutorInfo] = {}
    for kind, candidates in (("legacy", _LEGACY_CANDIDATES), ("functional", _FUNCTIONAL_CANDIDATES)):
        for module_name, attribute, marker in candidates:
            module = _import_optional(module_name)
            if module is None or not hasattr(module, marker):
                continue
            found[kind] = ExecutorInfo(
                kind=kind,
                module=module_name,
                attribute=attribute,
                transform=marker if kind == "functional" else None,
                executor_present=getattr(module, attribute, None) is not None,
                has_backward_sync=kind == "legacy"
                and hasattr(module, BACKWARD_SYNC_SYMBOL)
                and hasattr(module, SYNC_INSERTION_HELPER),
                te_imports_failed=_te_imports_failed(module) if kind == "legacy" else None,
                backward_sync_gate_off=_backward_sync_gate_off(module) if kind == "legacy" else None,
                honors_fp8_group=_honors_fp8_group(kind, module_name, module),
            )
            break
        else:
            found[kind] = ExecutorInfo(
                kind=kind, missing_reason=f"lightning-thunder {thunder_version} has none: {_WHY_ABSENT[kind]}"
            )
    return found


def _honors_fp8_group(kind: ExecutorKind, module_name: str, module: Any) -> bool:
    if kind == "legacy":
        return "fp8_group" in getattr(module, "TE_CTX_STR", "")
    impl = implementation_module(module_name)
    return impl is not None and "get_fp8_group" in inspect.getsource(impl)


def _backward_sync_gate_off(module: Any) -> str | None:
    """The flag of an ``if FLAG:`` that guards the legacy module's call of its sync-insertion helper and
    is false in this module, or None (read from the source of the function that calls the helper)."""
    import ast
    import textwrap

    caller = getattr(module, "_transformer_engine_bwd_fp8_meta_sync", None)
    if caller is None:
        return None
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(caller)))):
        if (
            isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and any(SYNC_INSERTION_HELPER in ast.unparse(statement) for statement in node.body)
            and not getattr(module, node.test.id, False)
        ):
            return node.test.id
    return None


def implementation_module(module_name: str) -> Any | None:
    """The functional executor's ``<module>_impl``, which holds its operators and its per-linear update
    (it imports TE: None without it)."""
    return _import_optional(f"{module_name}_impl")


def _te_imports_failed(module: Any) -> str | None:
    """The legacy module's own TE import failure (it catches it, warns once and sets TE_AVAILABLE =
    False), found by running its TE import statements again: the warning is gone when thunder imported
    the module before anyone listened."""
    if getattr(module, "TE_AVAILABLE", True) is not False or installed_version("transformer_engine") is None:
        return None
    return _replay_te_imports(module) or "TE_AVAILABLE is False although the module's TE imports succeed (a version gate?)"


def _replay_te_imports(module: Any) -> str | None:
    """Run the import statements of the module's ``try`` blocks that import TransformerEngine, in order;
    the first that raises, with its error, or None."""
    import ast

    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Try):
            continue
        imports = [s for s in node.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        if not any("transformer_engine" in ast.unparse(s) for s in imports):
            continue
        for statement in imports:
            try:
                exec(compile(ast.Module([statement], type_ignores=[]), module.__file__ or "<module>", "exec"), {})
            except Exception as error:
                return f"{ast.unparse(statement)}: {type(error).__name__}: {error}"
    return None


def executor_module(info: ExecutorInfo) -> Any:
    """The imported module of a found executor."""
    if info.module is None:
        raise LookupError(f"no {info.kind} TE executor: {info.missing_reason}")
    return importlib.import_module(info.module)


def jit_options(info: ExecutorInfo, fp8_recipe: Any | None = None) -> dict[str, Any]:
    """``thunder.jit`` keyword arguments that put this TE executor first (docs/facts.md, "Enable")."""
    import thunder

    module = executor_module(info)
    executor = getattr(module, info.attribute)
    if executor is None:
        raise LookupError(f"{info.module}.{info.attribute} is None: TransformerEngine is not importable")
    options: dict[str, Any] = {"executors": [executor, *thunder.get_default_executors()]}
    if info.kind == "functional":
        options["transforms"] = [getattr(module, info.transform)()]
    elif fp8_recipe is not None:
        options["te_fp8_recipe"] = fp8_recipe  # a misspelled key would be ignored silently
    return options


def jit_ddp(model: Any, jit_kwargs: dict[str, Any], **ddp_kwargs: Any) -> Any:
    """``thunder.distributed.ddp`` + ``thunder.jit`` in the order this thunder supports; ``ddp_kwargs``
    go to ``ddp`` (``bucket_size_in_mb``).

    ``broadcast_from=None``: the ranks build identical seeded weights, and broadcasting a CUDA leaf
    parameter fails under gloo (docs/facts.md).
    """
    import thunder
    import thunder.distributed

    version = parse_version(installed_version("lightning-thunder") or "")
    if version is not None and version < DDP_OF_JITTED_SINCE:
        return thunder.jit(thunder.distributed.ddp(model, broadcast_from=None, **ddp_kwargs), **jit_kwargs)
    return thunder.distributed.ddp(thunder.jit(model, **jit_kwargs), broadcast_from=None, **ddp_kwargs)


#: ``thunder.distributed.fsdp``'s strategies by name: ``FSDPType`` members (``sharding_strategy``) and
#: ``FSDPBucketingStrategy`` members (``bucketing_strategy``), the same names in every build from
#: 0.2.0.dev20240404 to 0.2.7.dev20260201 (docs/facts.md, "thunder's FSDP").
FSDP_SHARDING = ("ZERO2", "ZERO3")
FSDP_BUCKETING = ("NONE", "LAYER", "BLOCK")


def jit_fsdp(model: Any, jit_kwargs: dict[str, Any], strategy: str, device: str, bucketing: str | None = None) -> Any:
    """``thunder.distributed.fsdp`` (``strategy``: ``"ZERO2"`` or ``"ZERO3"``; ``bucketing``: ``"NONE"``,
    ``"LAYER"``, ``"BLOCK"`` or None for fsdp's default, NONE) + ``thunder.jit``, in the order this thunder
    supports (as ``jit_ddp``); the shards live on ``device`` (fsdp's default is the rank's GPU, which a CPU
    runner has none of). ``broadcast_from=None``: identical seeded weights on every rank."""
    import thunder
    import thunder.distributed
    import torch

    options = {"sharding_strategy": thunder.distributed.FSDPType[strategy], "broadcast_from": None,
               "device": torch.device(device)}
    if bucketing is not None:
        options["bucketing_strategy"] = thunder.distributed.FSDPBucketingStrategy[bucketing]
    version = parse_version(installed_version("lightning-thunder") or "")
    if version is not None and version < DDP_OF_JITTED_SINCE:
        return thunder.jit(thunder.distributed.fsdp(model, **options), **jit_kwargs)
    return thunder.distributed.fsdp(thunder.jit(model, **jit_kwargs), **options)


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    name: str
    capability: tuple[int, int]

    @property
    def fp8(self) -> bool:
        return tuple(self.capability) >= FP8_MIN_CAPABILITY

    def describe(self) -> str:
        return f"{self.name} (sm_{self.capability[0]}{self.capability[1]})"


@dataclasses.dataclass(frozen=True)
class Environment:
    """What this machine can run, as read by the environment probe (see envprobe.py)."""

    versions: Versions
    gpus: tuple[GpuInfo, ...]
    executors: dict[ExecutorKind, ExecutorInfo]
    #: Why ``import transformer_engine.pytorch`` failed, or None if it worked or TE is absent.
    te_import_error: str | None
    thunder_import_error: str | None
    #: Why ranks cannot be forked from a preloaded fork server here, or None (``envprobe.fork_error``).
    fork_error: str | None = None
    #: What the fork server imports: the most ``fork_stages()`` after which a forked child ran CUDA.
    fork_modules: tuple[str, ...] = ()
    #: Why a later stage is left out of ``fork_modules``, or None.
    fork_note: str | None = None

    def fork_preload(self) -> str:
        """What the fork server imports here, and why no more (the header's and ``doctor``'s words)."""
        return ", ".join(self.fork_modules) + (f"; {self.fork_note}" if self.fork_note else "")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Environment:
        return cls(
            versions=Versions(**data["versions"]),
            gpus=tuple(GpuInfo(g["name"], tuple(g["capability"])) for g in data["gpus"]),
            executors={k: ExecutorInfo(**v) for k, v in data["executors"].items()},
            te_import_error=data["te_import_error"],
            thunder_import_error=data["thunder_import_error"],
            fork_error=data.get("fork_error"),  # reports written before forked ranks have none
            fork_modules=tuple(data.get("fork_modules", ())),  # nor these, before staged preloads
            fork_note=data.get("fork_note"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "versions": dataclasses.asdict(self.versions),
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
            "executors": {k: v.as_dict() for k, v in self.executors.items()},
            "te_import_error": self.te_import_error,
            "thunder_import_error": self.thunder_import_error,
            "fork_error": self.fork_error,
            "fork_modules": list(self.fork_modules),
            "fork_note": self.fork_note,
        }

    # -- reasons: None means "can"; a string says why not, and is what a skip prints ----------------

    def import_failure(self) -> str | None:
        """Why an installed system under test does not import (thunder or TE), or None: never a skip."""
        failures = []
        if self.versions.thunder is not None and self.thunder_import_error:
            failures.append(f"lightning-thunder {self.versions.thunder}: {self.thunder_import_error}")
        if self.versions.transformer_engine is not None and self.te_import_error:
            failures.append(f"TransformerEngine {self.versions.transformer_engine}: {self.te_import_error}")
        return "; ".join(failures) or None

    def unsupported_pair(self) -> str | None:
        """Why this thunder build's legacy TE executor refuses this TE at all (its version gate, as thunder
        compares it: te_gates.py), or None: such a pair can only fall back to torch or fail, so the gate
        fails it rather than testing what is left."""
        thunder, te = parse_version(self.versions.thunder or ""), self.versions.transformer_engine
        if thunder is None or te is None or (gate := gate_for(thunder)) is None or gate.accepts(te):
            return None
        return f"lightning-thunder {thunder} does not support TransformerEngine {te}: it accepts TE where {gate.describe()}"

    def thunder_reason(self) -> str | None:
        if self.versions.thunder is None:
            return "lightning-thunder is not installed"
        if self.thunder_import_error:
            return f"lightning-thunder {self.versions.thunder} fails to import: {self.thunder_import_error}"
        return None

    def executor_reason(self, kind: ExecutorKind) -> str | None:
        if reason := self.thunder_reason():
            return reason
        return self.executors[kind].missing_reason

    def backward_sync_reason(self) -> str | None:
        if reason := self.executor_reason("legacy"):
            return reason
        if not self.executors["legacy"].has_backward_sync:
            return (
                f"lightning-thunder {self.versions.thunder}'s legacy TE executor has no {BACKWARD_SYNC_SYMBOL} "
                "(added 2024-05-13, thunder PR #379)"
            )
        if flag := self.executors["legacy"].backward_sync_gate_off:
            te = f"TransformerEngine {self.versions.transformer_engine}" if self.versions.transformer_engine else "TransformerEngine absent"
            return (
                f"lightning-thunder {self.versions.thunder}'s legacy TE executor inserts {BACKWARD_SYNC_SYMBOL} only "
                f"if {flag}, which is false here ({te}); without it, it reorders the TE linears instead"
            )
        return None

    def te_reason(self) -> str | None:
        if self.versions.transformer_engine is None:
            return "TransformerEngine is not installed (GPU tiers need `pip install .[gpu]` on an FP8 GPU host)"
        if self.te_import_error:
            return f"TransformerEngine {self.versions.transformer_engine} fails to import: {self.te_import_error}"
        return None

    def fp8_gpu_reason(self) -> str | None:
        if not self.gpus:
            return "no CUDA GPU visible (FP8 needs sm_89+)"
        if not any(g.fp8 for g in self.gpus):
            seen = ", ".join(g.describe() for g in self.gpus)
            return f"no FP8-capable GPU (need sm_89+; found {seen})"
        return None

    def fp8_reason(self) -> str | None:
        """Why thunder + TE FP8 cannot run here (TE, GPU), or None."""
        return self.te_reason() or self.fp8_gpu_reason()

    def gpus_reason(self, count: int) -> str | None:
        if len(self.gpus) < count:
            return f"needs {count} GPUs, {len(self.gpus)} visible"
        return None


# -- TransformerEngine API differences (imports happen only when called, in ranks or GPU tests) ---------


def fp8_global_state_manager() -> Any:
    """TE's ``FP8GlobalStateManager``: ``transformer_engine.pytorch.quantization`` from 2.9, ``.fp8`` before."""
    try:
        from transformer_engine.pytorch.quantization import FP8GlobalStateManager
    except ImportError:
        from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
    return FP8GlobalStateManager


def te_autocast(recipe: Any, group: Any | None = None) -> Any:
    """TE's FP8 autocast context: ``te.autocast(recipe=, amax_reduction_group=)`` from 2.9 (where
    ``fp8_autocast`` is deprecated), ``te.fp8_autocast(fp8_recipe=, fp8_group=)`` before."""
    import transformer_engine.pytorch as te

    if hasattr(te, "autocast"):
        return te.autocast(enabled=True, recipe=recipe, amax_reduction_group=group)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe, fp8_group=group)
