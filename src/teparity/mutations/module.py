"""Patches of thunder's module wrapper (``thunder.core.module.ThunderModule``): what a checkpoint of it holds, and which
of its parameters train."""

from __future__ import annotations

from typing import Any


def _thunder_module() -> Any:
    from thunder.core.module import ThunderModule

    return ThunderModule


def state_dict_of_initial_weights() -> None:
    """``ThunderModule.state_dict`` returns the parameters as they were when the module was compiled: a checkpoint
    loses the training so far."""
    module_class = _thunder_module()
    init, state_dict = module_class.__init__, module_class.state_dict

    def init_keeping_initial(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._teparity_initial = {name: tensor.detach().clone() for name, tensor in state_dict(self).items()}

    module_class.__init__ = init_keeping_initial
    module_class.state_dict = lambda self, *args, **kwargs: dict(self._teparity_initial)


def frozen_parameters_trained() -> None:
    """``ThunderModule`` makes every parameter require grad (as a wrapper that rebuilt its parameters without their
    ``requires_grad`` would): a frozen weight gets a gradient and trains."""
    module_class = _thunder_module()
    init = module_class.__init__

    def init_training_all(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        for parameter in self.parameters():
            parameter.requires_grad_(True)

    module_class.__init__ = init_training_all
