"""``doctor``: what the gate would see on this machine, tier by tier, and why not."""

from __future__ import annotations

from teparity.stack import reasons


def doctor() -> int:
    """What the gate would see here: the probe runs in the ranks' environment (``launch.rank_env``), as the
    gate's does, so its verdict is the gate's and its cache is the one the gate's next run reads."""
    from teparity.gate.ranks import default_backend
    from teparity.launch import rank_env
    from teparity.stack.envprobe import environment, new_run

    set_here = rank_env.apply_defaults()
    new_run()
    env = environment()
    print(env.versions.describe())
    print("GPUs:", ", ".join(g.describe() for g in env.gpus) or "none")
    for info in env.executors.values():
        print("TE executor", info.label())
    tiers = {
        "trace tier (tests/trace)": reasons.no_backward_sync(env),
        "numerics tier (tests/numerics)": reasons.no_fp8(env),
        "ddp tier (tests/ddp)": reasons.no_fp8(env),
        "GPU harness (tests/harness -m fp8)": reasons.no_fp8(env),
    }
    for tier, reason in tiers.items():
        print(f"{tier}: {'runs' if reason is None else 'skips: ' + reason}")
    print(f"multi-rank backend for 2 ranks: {default_backend(2)}")
    if env.fork_error:
        print(f"forked ranks: no, warm ranks instead: {env.fork_error}")
    else:
        print(f"forked ranks: the fork server imports {env.fork_preload()}")
    print("rank environment:", ", ".join(f"{k}={v}" for k, v in rank_env.in_force(set_here).items()))
    return 0
