"""normkit for PyTorch: RMSNorm forward/backward as torch custom ops (CPU and CUDA tensors).

- ``rms_norm(x, weight=None, eps=None, *, bias=None, residual=None, zero_centered=False,
  out_dtype=None)``: the functional form; works with autograd, ``torch.compile(fullgraph=True)``
  and CUDA graph capture.
- ``RMSNorm``: a drop-in for ``torch.nn.RMSNorm``.
- ``rms_norm_quant(x, weight=None, eps=None, *, mode="tensor", out_dtype=torch.float8_e4m3fn,
  scale=None, scale_ub=None, block=None, transposed=False, return_amax=False, residual=None,
  zero_centered=False, bias=None)``: the forward with an FP8/INT8 output (per-tensor, per-token,
  per-block or MXFP8 scales), returning a ``QuantOutput``; forward only, works with
  ``torch.compile``.
- ``patch(model)``: replace the RMSNorm modules of a Hugging Face transformers model in place.
- DTensor inputs (tensor and sequence parallelism): rows may be sharded, the hidden dimension is
  replicated first, dweight/dbias come out as ``Partial()`` sums. The sharding rules register
  themselves when ``rms_norm`` or ``rms_norm_quant`` first sees a DTensor;
  ``register_dtensor_sharding()`` registers them for direct calls of the ops.

The ops are ``torch.ops.normkit.rms_norm_fwd``, ``torch.ops.normkit.rms_norm_bwd`` and
``torch.ops.normkit.rms_norm_fwd_quant``. Plain eager calls of ``rms_norm`` skip their Python
machinery and call the C API directly (same results, bit for bit; see ``normkit.torch._eager``);
torch.compile, tracers, transforms and modes always see the ops. ``rms_norm_quant`` always goes
through its op.
"""

from normkit.torch._dtensor import register_dtensor_sharding, register_if_imported
from normkit.torch.functional import rms_norm
from normkit.torch.hf_patch import PatchedRMSNorm, patch
from normkit.torch.modules import RMSNorm
from normkit.torch.quant import QuantOutput, rms_norm_quant

register_if_imported()  # torch.distributed.tensor already imported: no cost to register now

__all__ = [
    "PatchedRMSNorm",
    "QuantOutput",
    "RMSNorm",
    "patch",
    "register_dtensor_sharding",
    "rms_norm",
    "rms_norm_quant",
]
