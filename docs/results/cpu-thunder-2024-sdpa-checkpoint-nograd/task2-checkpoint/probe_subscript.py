"""Which statement makes thunder's interpreter raise SequenceWrapperMethods.__getitem__() ... 'idx'?
Each probe is jitted alone (thunder.jit, default executors, CPU). Usage: PYTHONPATH=<thunder dir> python probe_subscript.py"""
import importlib.metadata, platform
from typing import Any
import torch, thunder
import torch.utils._pytree as pt

def builtin_list_subscript(x):      # PEP 585 generic alias of the builtin list type
    t = list[Any]; return x + 1
def nested_def_annotated_list(x):   # what torch 2.11's _pytree.tree_flatten does (nested helper annotated list[Any])
    def helper(a: list[Any]) -> None:
        pass
    return x + 1
def torch_pytree_tree_flatten(x):
    pt.tree_flatten((x,)); return x + 1
def torch_pytree_tree_map(x):       # torch.utils.checkpoint._infer_device_type calls tree_map
    pt.tree_map(lambda a: None, (x,)); return x + 1
def checkpoint_infer_device_type(x):
    import torch.utils.checkpoint as cp
    cp._infer_device_type(x); return x + 1

print(f"python {platform.python_version()} torch {torch.__version__} thunder {importlib.metadata.version('lightning-thunder')}")
for f in (builtin_list_subscript, nested_def_annotated_list, torch_pytree_tree_flatten, torch_pytree_tree_map, checkpoint_infer_device_type):
    try:
        thunder.jit(f)(torch.ones(2)); print(f"  {f.__name__}: ok")
    except Exception as e:
        print(f"  {f.__name__}: {type(e).__name__}: {str(e).splitlines()[0][:110]}")
