"""normkit for JAX: RMSNorm through XLA FFI targets (CPU, and CUDA in CUDA builds).

- ``rms_norm(x, weight, eps=1e-6, *, bias=None, residual=None, zero_centered=False,
  out_dtype=None)``: differentiable with ``jax.grad``; works under ``jit``, ``vmap`` and
  inside ``lax.scan``.

Importing this module registers the FFI targets ``normkit_rms_norm_fwd`` and
``normkit_rms_norm_bwd``. It raises ImportError if normkit was built without jax.
"""

from normkit.jax._rms_norm import rms_norm

__all__ = ["rms_norm"]
