"""FP8 scaling state of eager TE modules and of thunder's TE executors, in one normalized shape.

A snapshot maps each linear (its name in the network, "0", "2", ...) to its tensor roles, each with
``amax_history`` (``[L]``) and ``scale`` (``[]``), on the CPU:

    {"0": {"input": {...}, "weight": {...}, "grad_output": {...}}, ...}

Where the state lives, by side and version (docs/facts.md; TE csrc/common.h column order):

- eager ``te.Linear`` and the legacy executor's ``TELinear`` (both TE modules): ``fp8_meta["scaling_fwd"]``
  columns 0 input, 1 weight (2 output, unused); ``fp8_meta["scaling_bwd"]`` column 0 grad_output
  (1 grad_input, unused). ``tex.FP8TensorMeta`` in TE 1.x, a ``RecipeState`` in 2.x: same attributes.
- the functional executor: one ``TERecipeState`` per linear and direction in ``bsym._call_ctx`` of
  ``get_te_fp8_state_N``; its ``.state`` holds ``[L, 2]`` (input, weight) forward and ``[L, 1]``
  (grad_output) backward. Found by following each TE linear's quantizer arguments to their producers.

Recipes without scaling state (Float8CurrentScaling) give an empty snapshot.
"""

from __future__ import annotations

from typing import Any

from teparity.records import Snapshot

FORWARD_ROLES = ("input", "weight")
BACKWARD_ROLES = ("grad_output",)


def _roles(state: Any, roles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    if state is None or not hasattr(state, "amax_history"):
        return {}
    return {
        role: {
            "amax_history": state.amax_history[:, column].detach().float().cpu().clone(),
            "scale": state.scale[column].detach().float().cpu().clone(),
        }
        for column, role in enumerate(roles)
    }


def _module_state(module: Any) -> dict[str, dict[str, Any]]:
    forward, backward = _scaling_states(module)
    return {**_roles(forward, FORWARD_ROLES), **_roles(backward, BACKWARD_ROLES)}


def _scaling_states(module: Any) -> tuple[Any, Any]:
    """A TE module's forward and backward delayed-scaling states (None before its first FP8 forward)."""
    meta = getattr(module, "fp8_meta", None) or {}
    return meta.get("scaling_fwd"), meta.get("scaling_bwd")


def live_scaling_tensors(network: Any) -> list[Any]:
    """The delayed-scaling tensors themselves (not copies) of every TE module in ``network``: to put a state back."""
    return [tensor for child in network.modules() for state in _scaling_states(child)
            for name in ("amax_history", "scale", "scale_inv") if (tensor := getattr(state, name, None)) is not None]


def whole_states(network: Any) -> dict[str, Any]:
    """Every TE module's delayed-scaling state, whole (every column, whatever the module: ``te.LayerNormMLP`` has two
    GEMMs), on the CPU: ``{"<module>.scaling_fwd.amax_history": tensor, "<module>.scaling_fwd.scale": ..., ...}``."""
    states = {}
    for name, child in network.named_modules():
        for key, state in zip(("scaling_fwd", "scaling_bwd"), _scaling_states(child)):
            if state is not None and hasattr(state, "amax_history"):
                for role in ("amax_history", "scale"):
                    states[f"{name}.{key}.{role}"] = getattr(state, role).detach().float().cpu().clone()
    return states


def eager_snapshot(network: Any) -> Snapshot:
    """State of every TE module in an eager network (unwraps torch DDP)."""
    network = getattr(network, "module", network)
    return {name: state for name, child in network.named_children() if (state := _module_state(child))}


def forward_roles(snapshot: Snapshot) -> Snapshot:
    """The forward roles of a snapshot (a forward-only step has no backward state to compare)."""
    return {name: {role: state for role, state in roles.items() if role in FORWARD_ROLES} for name, roles in snapshot.items()}


def legacy_snapshot(forward_trace: Any, linear_names: list[str]) -> Snapshot:
    """State of the legacy executor's ``TELinear`` modules, matched to linears by weight argument."""
    linears = [bsym for bsym in forward_trace.bound_symbols if bsym.sym.name.startswith("te_linear_")]
    modules = [bsym._call_ctx[bsym.sym.name].func for bsym in linears]
    weights = parameters_behind(forward_trace, [b.args[1] for b in linears], linear_names)
    return _by_name(linear_names, [_module_state(m) for m in modules], weights, [id(m) for m in modules])


def functional_snapshot(forward_trace: Any, backward_trace: Any | None, linear_names: list[str]) -> Snapshot:
    """State of the functional executor's recipe states, matched to linears through quantizer arguments
    (no backward trace: a forward-only program, forward roles only)."""
    traces = (forward_trace,) if backward_trace is None else (forward_trace, backward_trace)
    producers = {
        proxy.name: bsym
        for trace in traces
        for bsym in trace.bound_symbols
        if bsym.sym.name.startswith("get_te_fp8_")
        for proxy in bsym.flat_proxy_outs
    }

    def state_symbol(quantizer: Any) -> Any:
        """The ``get_te_fp8_state_N`` symbol behind a quantizer (through ``get_te_fp8_quantizers_N``)."""
        return producers[producers[quantizer.name].args[0].name]

    def recipe_state(quantizer: Any) -> Any:
        state = state_symbol(quantizer)
        return state._call_ctx[state.sym.name].state

    # A backward linear is matched to its forward linear by the forward state its input quantizer was
    # made from: under activation checkpointing the backward's quantizers are the recomputation's, made
    # from the same forward state (thunder's checkpointing transform reuses it).
    per_linear: list[dict[str, dict[str, Any]]] = []
    weights: list[Any] = []
    identities: list[int] = []
    by_forward_state: dict[str, dict[str, dict[str, Any]]] = {}
    for bsym in forward_trace.bound_symbols:
        if bsym.sym.name == "te_functional_linear_fwd":
            _, weight, _, q_input, _ = bsym.args
            state = _roles(recipe_state(q_input), FORWARD_ROLES)
            per_linear.append(state)
            weights.append(weight)
            identities.append(id(recipe_state(q_input)))
            by_forward_state[state_symbol(q_input).sym.name] = state
    for bsym in () if backward_trace is None else backward_trace.bound_symbols:
        if bsym.sym.name == "te_functional_linear_bwd":
            q_input, q_grad_output = bsym.args[3], bsym.args[5]
            by_forward_state[state_symbol(q_input).sym.name].update(_roles(recipe_state(q_grad_output), BACKWARD_ROLES))
    return _by_name(linear_names, per_linear, parameters_behind(forward_trace, weights, linear_names), identities)


def _parameter_proxy_name(linear_name: str) -> str:
    """thunder names the proxy of parameter ``a.weight`` ``t_a_weight``."""
    return f"t_{linear_name.replace('.', '_')}_weight"


def parameters_behind(trace: Any, weights: list[Any], linear_names: list[str]) -> list[str | None]:
    """The parameter proxy behind each TE linear's weight argument: the argument itself, or under thunder's FSDP
    the parameter's shard gathered for it (``all_gather`` then ``wait``), followed back through producers of one
    proxy argument. None where no parameter is reached (e.g. a bucket's unpacking)."""
    parameters = {_parameter_proxy_name(name) for name in linear_names}
    producers = {out.name: bsym for bsym in trace.bound_symbols for out in bsym.flat_proxy_outs}
    names: list[str | None] = []
    for weight in weights:
        name = getattr(weight, "name", None)
        while name not in parameters and (producer := producers.get(name)) is not None \
                and len(producer.flat_proxy_args) == 1:
            name = producer.flat_proxy_args[0].name
        names.append(name if name in parameters else None)
    return names


def _by_name(linear_names: list[str], states: list[dict[str, dict[str, Any]]], weights: list[str | None],
             identities: list[int] | None = None) -> Snapshot:
    """Name each linear's state: by the parameter behind its weight argument where every one has one
    (``parameters_behind``: independent linears that thunder reorders keep their names), else in trace
    order (a chain of linears: the trace keeps the network's order). A linear called more than once has one
    entry per distinct state object (``identities``; None: each state its own) in call order: its name, then ``name@2`` and on (one state
    shared by its calls is one entry, as eager TE's module keeps). No TE linear at all is a fallback that the
    TE-claims check reports first (an empty snapshot); some but not all cannot be matched to names and raises."""
    if not states:
        return {}
    by_proxy = {_parameter_proxy_name(name): name for name in linear_names}
    if len(states) > len(linear_names) and all(weight in by_proxy for weight in weights):
        named: Snapshot = {}
        seen: dict[str, list[int]] = {}
        for weight, state, identity in zip(weights, states, identities or range(len(states))):
            calls = seen.setdefault(weight, [])
            if identity not in calls:
                calls.append(identity)
                name = by_proxy[weight] if len(calls) == 1 else f"{by_proxy[weight]}@{len(calls)}"
                if state:
                    named[name] = state
        return named
    if len(states) != len(linear_names):
        raise AssertionError(
            f"found FP8 state for {len(states)} TE linears, the network has {len(linear_names)} ({linear_names})"
        )
    if all(weight in by_proxy for weight in weights) and len(set(weights)) == len(weights):
        return {by_proxy[weight]: state for weight, state in zip(weights, states) if state}
    return {name: state for name, state in zip(linear_names, states) if state}
