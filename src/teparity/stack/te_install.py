"""How TransformerEngine is installed for the FP8 tiers: one line per kind of host, chosen by the CUDA that torch was
built with. ``transformer-engine`` is a meta-package (its METADATA, TE 2.9+): the extra ``pytorch`` is the torch
extension alone (``transformer_engine_torch``, source only, compiled against the installed torch: hence
``--no-build-isolation``), and the core library is the extra ``core-cu13`` or ``core-cu12`` (``core`` means CUDA 12).
The README, the skip reasons, ``doctor``, pyproject's ``gpu`` extras and tox name these lines and no other
(``harness/test_te_install.py``, which also reads TE's published METADATA)."""

from __future__ import annotations

#: The TE release of the install line the README and the skip reasons give (the committed GPU runs are on it).
TE_RELEASE = "2.9.0"
#: The core library's extra, by the CUDA major version torch was built with.
CORE_EXTRAS = {13: "core-cu13", 12: "core-cu12"}
#: The extra of TE's torch extension.
TORCH_EXTRA = "pytorch"


def requirement(cuda_major: int, version: str | None = TE_RELEASE) -> str:
    """TE for a torch built with CUDA ``cuda_major``: the core for that CUDA and the torch extension."""
    return f"transformer-engine[{CORE_EXTRAS[cuda_major]},{TORCH_EXTRA}]" + (f"=={version}" if version else "")


def install_line(cuda_major: int) -> str:
    return f'pip install --no-build-isolation "{requirement(cuda_major)}"'


def for_torch(torch_cuda: str | None) -> str:
    """The install line for the torch installed here (``torch.version.cuda``: None for a CPU build), in words."""
    major = int(torch_cuda.split(".")[0]) if torch_cuda else None
    if major in CORE_EXTRAS:
        return f"{install_line(major)} for this torch (built with CUDA {torch_cuda})"
    this = f"built with CUDA {torch_cuda}" if torch_cuda else "a CPU build"
    return (f"a torch built with CUDA 13 or 12 first (this one is {this}), then {install_line(13)}, "
            f"{CORE_EXTRAS[12]} for CUDA 12")
