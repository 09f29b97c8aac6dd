"""normkit: RMSNorm forward and backward kernels for CUDA GPUs and CPUs.

Framework layers are separate modules, each importing its framework only when imported:

- ``normkit.torch``: ``rms_norm``, ``RMSNorm`` (a drop-in for ``torch.nn.RMSNorm``), ``patch``
- ``normkit.jax``: ``rms_norm`` through ``jax.ffi``
- ``normkit.flax``: ``RMSNorm``, parameter-compatible with ``flax.nnx.RMSNorm``
"""

from normkit._C import NormkitError, cpu_paths, cuda_device_count, has_cuda_build, version

__version__ = "0.1.0"

__all__ = [
    "NormkitError",
    "__version__",
    "cpu_paths",
    "cuda_device_count",
    "has_cuda_build",
    "version",
]
