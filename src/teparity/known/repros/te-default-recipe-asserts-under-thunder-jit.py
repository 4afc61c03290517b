"""A te.autocast(enabled=False) written without a recipe inside a module's forward (the common way to keep a layer out
of FP8) raises under thunder.jit from TE 2.15 on: TE builds its default recipe there and asserts it is not compiling,
and thunder answers torch.compiler.is_compiling() with True while it traces. Eager TE runs the same module. An fp32
MLP of 2 torch linears whose first runs under te.autocast(enabled=False); thunder.jit without a TE executor
(the raise needs none). Needs a GPU and TransformerEngine."""
import importlib.metadata
import sys

import torch


def cannot(why: str) -> None:
    print(f"CANNOT RUN HERE: {why}")
    sys.exit(2)


class FirstOutOfFp8(torch.nn.Module):
    def __init__(self, te) -> None:
        super().__init__()
        self.te = te
        self.first, self.rest = torch.nn.Linear(32, 64, bias=False), torch.nn.Linear(64, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        off = self.te.autocast(enabled=False) if hasattr(self.te, "autocast") else self.te.fp8_autocast(enabled=False)
        with off:
            x = self.first(x)
        return self.rest(x)


def main() -> None:
    if not torch.cuda.is_available():
        cannot("no GPU")
    try:
        import thunder
        import transformer_engine
        import transformer_engine.pytorch as te
    except Exception as error:  # noqa: BLE001
        cannot(f"thunder or TransformerEngine does not import: {error}")
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, TransformerEngine {transformer_engine.__version__}, torch {torch.__version__}")
    module = FirstOutOfFp8(te).cuda()
    x = torch.randn(16, 32, device="cuda")
    module(x)  # eager: runs
    try:
        thunder.jit(module)(x)
    except Exception as error:  # noqa: BLE001
        said = f"{type(error).__name__}: {error}"
        if "Creating Recipe objects inside compiled regions" in said:
            print(f"REPRODUCED: eager runs the module; thunder.jit raises {said[:300]}")
            sys.exit(0)
        print(f"NOT REPRODUCED: thunder.jit raises another error (another defect): {said[:300]}")
        sys.exit(1)
    print("NOT REPRODUCED: thunder.jit runs the module with a disabled te.autocast without a recipe inside")
    sys.exit(1)


if __name__ == "__main__":
    main()
