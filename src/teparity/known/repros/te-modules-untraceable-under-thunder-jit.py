"""thunder.jit of a network of TE's own modules (two te.Linear in bfloat16), one SGD step under TE's autocast with
DelayedScaling: the call raises. Then an eager te.Linear step in the same process: with TE 2.9 it raises too (the
failed trace left TensorProxies in TE's global amax buffer). Needs an FP8 GPU (compute capability 8.9 or newer),
thunder and TransformerEngine 2.x."""
import importlib.metadata
import sys

import torch


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


def step(te, recipe, network) -> None:
    x = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
    with te.autocast(enabled=True, recipe=recipe):
        y = network(x)
    y.float().square().mean().backward()
    torch.cuda.synchronize()


def main() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        cannot("no FP8 GPU (compute capability 8.9 or newer)")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    if not hasattr(te, "autocast"):
        cannot(f"TransformerEngine {transformer_engine.__version__} has no te.autocast (2.9 on)")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    torch.manual_seed(0)
    network = torch.nn.Sequential(te.Linear(64, 128, params_dtype=torch.bfloat16),
                                  te.Linear(128, 32, params_dtype=torch.bfloat16)).cuda()
    try:
        step(te, DelayedScaling(), thunder.jit(network))
    except Exception as error:  # noqa: BLE001
        raised = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    else:
        print("NOT REPRODUCED: thunder.jit ran the network of TE modules")
        sys.exit(1)
    try:
        step(te, DelayedScaling(), te.Linear(64, 32, params_dtype=torch.bfloat16).cuda())
        after = "ran"
    except Exception as error:  # noqa: BLE001
        after = f"raised {type(error).__name__}: {' '.join(str(error).split())[:200]}"
    print(f"REPRODUCED: thunder.jit of te.Linear modules raised {raised}; an eager te.Linear step after it, same "
          f"process: {after}")
    sys.exit(0)


if __name__ == "__main__":
    main()
