"""``doctor``: what the gate would see on this machine, tier by tier, and why not."""

from __future__ import annotations

from teparity.stack import reasons
from teparity.stack.environment import Environment


def tiers(env: Environment, backend: str, world_size: int = 2) -> dict[str, str | None]:
    """Each tier and part of one (its directory), and why it does not run here, or None: the skip reasons the
    gate's tests print. A system under test that does not import fails every tier instead (``doctor`` says so)."""
    fp8 = reasons.no_fp8(env)
    either = lambda kind: reasons.no_executor(env, kind)  # noqa: E731
    executors = None if not (either("legacy") and either("functional")) else f"{either('legacy')}; {either('functional')}"
    return {
        "trace tier, legacy backward sync (tests/trace)": reasons.no_backward_sync(env),
        "trace tier, thunder's DDP and FSDP transforms (tests/trace)": reasons.no_thunder(env),
        "trace tier, TE claims and trace invariants (tests/trace)": fp8 or executors,
        "numerics tier (tests/numerics)": fp8 or executors,
        "features tier (tests/features)": fp8 or executors,
        "ddp tier (tests/ddp)": fp8 or executors,
        "fsdp tier (tests/fsdp)": fp8 or executors,
        "GPU harness (harness -m fp8)": fp8,
    }


def doctor() -> int:
    """What the gate would see here: the probe runs in the ranks' environment (``launch.rank_env``), as the
    gate's does, so its verdict is the gate's and its cache is the one the gate's next run reads. Exit 1 where the
    gate is red before it tests anything: no thunder (it stops), or a system under test that does not import or an
    unsupported pair (every gate test fails)."""
    from teparity.gate.ranks import default_backend
    from teparity.launch import rank_env
    from teparity.stack.envprobe import environment, new_run
    from teparity.stack.provenance import teparity_commit

    set_here = rank_env.apply_defaults()
    new_run()
    env = environment()
    print(env.versions.describe())
    for placed in env.versions.placements():
        print(f"placed by its source: {placed}")
    print(f"teparity: {teparity_commit()}")
    print("GPUs:", ", ".join(g.describe() for g in env.gpus) or "none")
    for info in env.executors.values():
        print("TE executor", info.label())
    if absent := reasons.thunder_absent(env):
        print(f"THE GATE STOPS here, red: {absent}")
    if broken := reasons.import_failure(env) or reasons.unsupported_pair(env):
        print(f"EVERY GATE TEST FAILS here: {broken}")
    backend = default_backend(2)
    for tier, reason in tiers(env, backend).items():
        print(f"{tier}: {'runs' if reason is None else 'skips: ' + reason}")
    unfit = reasons.fsdp_backend_unfit(backend, len(env.gpus))
    print("fsdp tier reference: " + (f"torch DDP + eager TE, since {unfit}" if unfit else "torch FSDP2 + eager TE"))
    print(f"multi-rank backend for 2 ranks: {backend}")
    if env.fork_error:
        print(f"forked ranks: no, warm ranks instead: {env.fork_error}")
    else:
        print(f"forked ranks: the fork server imports {env.fork_preload()}")
    print("rank environment:", ", ".join(f"{k}={v}" for k, v in rank_env.in_force(set_here).items()))
    return 1 if absent or broken else 0
