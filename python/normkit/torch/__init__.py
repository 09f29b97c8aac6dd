"""normkit for PyTorch: RMSNorm forward/backward as torch custom ops (CPU and CUDA tensors).

- ``rms_norm(x, weight=None, eps=None, *, bias=None, residual=None, zero_centered=False,
  out_dtype=None)``: the functional form; works with autograd, ``torch.compile(fullgraph=True)``
  and CUDA graph capture.
- ``RMSNorm``: a drop-in for ``torch.nn.RMSNorm``.
- ``patch(model)``: replace the RMSNorm modules of a Hugging Face transformers model in place.

The ops are ``torch.ops.normkit.rms_norm_fwd`` and ``torch.ops.normkit.rms_norm_bwd``. Plain eager
calls skip their Python machinery and call the C API directly (same results, bit for bit; see
``normkit.torch._eager``); torch.compile, tracers, transforms and modes always see the ops.
"""

from normkit.torch.functional import rms_norm
from normkit.torch.hf_patch import PatchedRMSNorm, patch
from normkit.torch.modules import RMSNorm

__all__ = ["PatchedRMSNorm", "RMSNorm", "patch", "rms_norm"]
