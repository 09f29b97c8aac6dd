"""Torch modes that record what passes through them, for the tests that check that a
dispatch or torch-function mode sees normkit's custom ops (the eager fast paths must step
aside for them)."""

from __future__ import annotations

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class DispatchLog(TorchDispatchMode):
    """Records the name of every op dispatched under it (``ops``)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class FunctionLog(TorchFunctionMode):
    """Records the name of every torch function called under it (``funcs``)."""

    def __init__(self):
        super().__init__()
        self.funcs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.funcs.append(str(func))
        return func(*args, **(kwargs or {}))
