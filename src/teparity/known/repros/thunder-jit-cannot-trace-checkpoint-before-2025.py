"""thunder.jit before 0.2.0.dev20250112 cannot trace a torch.utils.checkpoint region (non-reentrant): its interpreter
follows torch's checkpoint code and raises, by build and torch: with torch 2.11 the 'idx' TypeError of
SequenceWrapperMethods.__getitem__ (torch's annotated tree_flatten), with torch 2.4-2.5 "requires_grad=True is not yet
supported within thunder.jit" (torch.empty(..., requires_grad=True)); dev20241020 .. dev20250105 call the region
uninterpreted, passing a TensorProxy to linear. An fp32 MLP of 3 bias-free linears, the first two under
torch.utils.checkpoint.checkpoint(use_reentrant=False), one forward and backward under thunder.jit (default executors)
beside eager torch. No TransformerEngine and no GPU needed: it runs on the CPU (the gate meets it under TE's
executors, which the tracing never reaches)."""
import importlib.metadata
import sys
import traceback

import torch
import torch.utils.checkpoint

SIZES, BATCH = (48, 64, 32, 16), 16
#: What thunder.jit raises, by build and torch, while it traces the checkpointed region: the error, in words.
CANNOT_TRACE = {
    "SequenceWrapperMethods.__getitem__() missing 1 required positional argument: 'idx'": "its interpreter's 'idx' error",
    "requires_grad=True is not yet supported within thunder.jit": "requires_grad=True is not supported",
    "must be Tensor, not TensorProxy": "a TensorProxy reaches torch's linear",
}


class CheckpointedMLP(torch.nn.Sequential):
    """The layers before the last run under torch.utils.checkpoint: the backward recomputes them."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self[-1](torch.utils.checkpoint.checkpoint(self._head, x, use_reentrant=False))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        for layer in list(self)[:-1]:
            x = layer(x)
        return x


def net() -> CheckpointedMLP:
    torch.manual_seed(0)
    return CheckpointedMLP(*(torch.nn.Linear(a, b, bias=False) for a, b in zip(SIZES, SIZES[1:])))


def step(module: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The output and every parameter's gradient after one backward."""
    out = module(x)
    out.sum().backward()
    return [out.detach(), *(p.grad for p in module.parameters())]


def main() -> None:
    try:
        import thunder
    except Exception as error:  # noqa: BLE001
        print(f"CANNOT RUN HERE: lightning-thunder does not import: {error}")
        sys.exit(2)
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    x = torch.randn(BATCH, SIZES[0], generator=torch.Generator().manual_seed(1))
    expected = step(net(), x)
    try:
        got = step(thunder.jit(net()), x)
    except Exception as error:  # noqa: BLE001
        print(f"thunder.jit raised {type(error).__name__}: {(str(error).splitlines() or [''])[0][:240]}")
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        if known := [words for error_text, words in CANNOT_TRACE.items() if error_text in text]:
            print(f"REPRODUCED: thunder.jit cannot trace the torch.utils.checkpoint region ({known[0]}); eager torch ran it")
            sys.exit(0)
        print("NOT REPRODUCED: thunder raised, but none of this defect's errors (another defect)")
        sys.exit(1)
    difference = max((a - b).abs().max().item() for a, b in zip(got, expected))
    verdict = "matches eager" if difference < 1e-5 else "another defect: it parts from eager"
    print(f"NOT REPRODUCED: thunder.jit traced the checkpointed region and {verdict} (max |thunder - eager| over the "
          f"output and the gradients {difference:.3g})")
    sys.exit(1)


if __name__ == "__main__":
    main()
