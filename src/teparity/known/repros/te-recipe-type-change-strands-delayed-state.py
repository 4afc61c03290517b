"""Eager TE alone: a te.Linear trained one step under DelayedScaling, one under Float8CurrentScaling, then one under
the same DelayedScaling object again. The third step makes a new delayed-scaling state (the module's state was a
current-scaling one), but TE's global amax buffer still holds the first state's tensors (the module registers once),
so the new state's amax history and scale are never updated: its scale stays 1 and the step's amax stays pending in
row 0 of its history. A te.Linear that only ever ran DelayedScaling is updated after its first step. Needs an FP8 GPU
(compute capability 8.9 or newer) and TransformerEngine 2.x."""
import sys

import torch


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def step(te, linear, recipe, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 32, generator=generator).cuda()
    with te.autocast(enabled=True, recipe=recipe):
        y = linear(x)
    y.backward(torch.randn(16, 16, generator=generator).cuda())


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling, Float8CurrentScaling
    except Exception as error:  # noqa: BLE001
        cannot(f"TransformerEngine 2.x does not import here: {error}")
    if not hasattr(te, "autocast"):
        cannot(f"TransformerEngine {transformer_engine.__version__} has no te.autocast (2.9 on)")
    print(f"TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    delayed, current = DelayedScaling(), Float8CurrentScaling()
    switched, steady = (te.Linear(32, 16, bias=False, params_dtype=torch.float32).cuda() for _ in range(2))
    for seed, recipe in enumerate((delayed, current, delayed)):
        step(te, switched, recipe, seed)
    step(te, steady, delayed, 2)
    torch.cuda.synchronize()
    state, reference = switched.fp8_meta["scaling_fwd"], steady.fp8_meta["scaling_fwd"]
    scale, pending = float(state.scale[0]), float(state.amax_history[0, 0])
    print(f"after Delayed, Current, Delayed: the input's scale {scale}, amax pending in history row 0 {pending}; "
          f"a module of Delayed steps alone, after one step: scale {float(reference.scale[0])}, row 0 "
          f"{float(reference.amax_history[0, 0])}")
    if scale == 1.0 and pending > 0 and float(reference.scale[0]) != 1.0:
        print("REPRODUCED: after the recipe type changed and back, the module's new delayed-scaling state was not "
              "updated (scale 1, the step's amax still pending), where a module's first delayed state is updated")
        sys.exit(0)
    print("NOT REPRODUCED: the new delayed-scaling state was updated")
    sys.exit(1)


if __name__ == "__main__":
    main()
