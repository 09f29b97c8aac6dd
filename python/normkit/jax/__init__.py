"""normkit for JAX: RMSNorm through XLA FFI targets (CPU, and CUDA in CUDA builds).

- ``rms_norm(x, weight, eps=1e-6, *, bias=None, residual=None, zero_centered=False,
  out_dtype=None)``: differentiable with ``jax.grad``; works under ``jit`` (operands sharded
  over a mesh stay split by rows), ``vmap``, ``shard_map`` and inside ``lax.scan``.
- ``rms_norm_quant(x, weight=None, eps=1e-6, *, mode="tensor", out_dtype=jnp.float8_e4m3fn,
  scale=None, scale_ub=None, block=None, transposed=False, return_amax=False, residual=None,
  zero_centered=False, bias=None)``: the forward with an FP8/INT8 output (per-tensor, per-token,
  per-block or MXFP8 scales), returning a ``QuantOutput``; forward only, works under ``jit``
  (sharded by rows too) and ``vmap``.

Importing this module registers the FFI targets ``normkit_rms_norm_fwd``,
``normkit_rms_norm_bwd`` and ``normkit_rms_norm_fwd_quant``. It raises ImportError if normkit
was built without jax.
"""

from normkit.jax._rms_norm import rms_norm
from normkit.jax._rms_norm_quant import QuantOutput, rms_norm_quant

__all__ = ["QuantOutput", "rms_norm", "rms_norm_quant"]
