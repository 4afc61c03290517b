"""thunder.jit(cache="symbolic values") of a module raises NotImplementedError on its first call: the interpreter
cannot unpack a parameter's shape (`_modules['0']._parameters['weight'].shape[0]`) from its provenance record. Two
bias-free linears, three calls of input shapes (2, 16, 32), (2, 32, 32), (2, 16, 32), each with a backward. Needs no
GPU and no TransformerEngine (the TE executors meet it the same way)."""
import importlib.metadata
import sys

import torch

SHAPES = ((2, 16, 32), (2, 32, 32), (2, 16, 32))
SAID = "Exception occured unpacking object from ProvenanceRecord"


def main() -> None:
    try:
        import thunder
    except Exception as error:  # noqa: BLE001
        print(f"CANNOT RUN HERE: thunder does not import: {error}")
        sys.exit(2)
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    network = torch.nn.Sequential(torch.nn.Linear(32, 64, bias=False), torch.nn.Linear(64, 16, bias=False))
    jitted = thunder.jit(network, cache="symbolic values")
    for call, shape in enumerate(SHAPES):
        x = torch.randn(shape, requires_grad=True, generator=torch.Generator().manual_seed(call))
        try:
            jitted(x).sum().backward()
        except NotImplementedError as error:
            if SAID in str(error):
                print(f"REPRODUCED: call {call} (input {shape}) raised NotImplementedError: "
                      f"{' '.join(str(error).split())[:300]}")
                sys.exit(0)
            print(f"NOT REPRODUCED: another defect: NotImplementedError: {' '.join(str(error).split())[:300]}")
            sys.exit(1)
        except Exception as error:  # noqa: BLE001
            print(f"NOT REPRODUCED: another defect: {type(error).__name__}: {' '.join(str(error).split())[:300]}")
            sys.exit(1)
    print(f"NOT REPRODUCED: {len(SHAPES)} calls of {len(set(SHAPES))} shapes ran in {thunder.cache_misses(jitted)} "
          "cache entry(ies) under symbolic values")
    sys.exit(1)


if __name__ == "__main__":
    main()
