"""thunderfx (torch.compile with thunder's backend) raises at its first call on torch 2.12: thunder interprets the
split graph module's lazy recompile, torch.fx's Python code generation, and fails in it: thunder 0.2.5 and later on
`len(user.users.keys())` in `delete_unused_values` (its interpreter has no len() of a keys view), 0.2.1 .. 0.2.4 on
the Graph's node list ("attribute nodes of Graph object out of sync"). A Linear-GELU-Linear in fp32 on the CPU, one
forward and backward. Needs no GPU and no TransformerEngine (the TE executors' thunderfx rows meet it the same way)."""
import importlib.metadata
import sys

import torch

#: What thunder raises, by build, inside torch.fx's code generation.
SAID = ("object of type 'MappingKeysView' has no len()", "attribute nodes of Graph object out of sync")


def main() -> None:
    try:
        from thunder.dynamo import thunderfx
    except Exception as error:  # noqa: BLE001
        print(f"CANNOT RUN HERE: thunder's thunderfx does not import: {type(error).__name__}: {error}")
        sys.exit(2)
    print(f"thunder {importlib.metadata.version('lightning-thunder')}, torch {torch.__version__}")
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
    compiled = thunderfx(network)
    x = torch.randn(8, 32, requires_grad=True)
    try:
        compiled(x).sum().backward()
    except Exception as error:  # noqa: BLE001
        said = " ".join(str(error).split())[:300]
        if any(text in str(error) for text in SAID):
            print(f"REPRODUCED: thunderfx's first call raised {type(error).__name__}: {said}")
            sys.exit(0)
        print(f"NOT REPRODUCED: another defect: {type(error).__name__}: {said}")
        sys.exit(1)
    torch.testing.assert_close(compiled(x), network(x))
    print("NOT REPRODUCED: thunderfx ran the forward and backward and matches eager torch")
    sys.exit(1)


if __name__ == "__main__":
    main()
