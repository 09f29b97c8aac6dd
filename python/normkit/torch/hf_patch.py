"""normkit.torch.patch: swap the RMSNorm modules of Hugging Face transformers models for normkit.

Two conventions cover the RMSNorms of the common decoder models:

- "llama" (Llama, Mistral, Mixtral, Qwen2, Qwen3, ...): ``weight * normed.to(input_dtype)``;
  the output dtype is ``promote_types(weight.dtype, x.dtype)``.
- "gemma" (Gemma, Gemma2, Gemma3): ``(normed * (1 + weight.float())).type_as(x)``; the output
  dtype is ``x.dtype``.

A module is a candidate when its class name ends in "RMSNorm", it has a 1-D ``weight``
Parameter, an ``eps`` or ``variance_epsilon`` float, and no other parameters, buffers or
children. Its convention is found by running it once on a small random input in two dtypes and
comparing with both conventions (so unknown classes with the same contract are handled, and a
class that changed behaviour is left alone). Modules on the meta device cannot be run; for them
only the classes named below are replaced, by name.
"""

from __future__ import annotations

import torch

from normkit.torch.functional import rms_norm

# Class name -> convention, for modules that cannot be probed (meta device).
KNOWN_CLASSES = {
    "LlamaRMSNorm": "llama",
    "MistralRMSNorm": "llama",
    "MixtralRMSNorm": "llama",
    "Qwen2RMSNorm": "llama",
    "Qwen2MoeRMSNorm": "llama",
    "Qwen3RMSNorm": "llama",
    "Qwen3MoeRMSNorm": "llama",
    "GemmaRMSNorm": "gemma",
    "Gemma2RMSNorm": "gemma",
    "Gemma3RMSNorm": "gemma",
}

_EPS_ATTRS = ("variance_epsilon", "eps")


class PatchedRMSNorm(torch.nn.Module):
    """Stands in for a transformers RMSNorm module.

    It holds the original's ``weight`` Parameter itself (so ``state_dict`` keys, weight tying
    and optimizer state are unchanged) and its epsilon under the original's attribute name.
    """

    def __init__(self, original: torch.nn.Module, eps_attr: str, convention: str):
        super().__init__()
        self.weight = original.weight
        self.eps_attr = eps_attr
        setattr(self, eps_attr, float(getattr(original, eps_attr)))
        self.convention = convention
        self.original_class = type(original).__name__

    @property
    def epsilon(self) -> float:
        return getattr(self, self.eps_attr)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        eps = getattr(self, self.eps_attr)
        if self.convention == "gemma":
            return rms_norm(hidden_states, weight, eps, zero_centered=True)
        x_dtype = hidden_states.dtype
        # out_dtype None is x's dtype; promote_types only when the dtypes differ (host time).
        out_dtype = None if weight.dtype is x_dtype else torch.promote_types(weight.dtype, x_dtype)
        return rms_norm(hidden_states, weight, eps, out_dtype=out_dtype)

    def extra_repr(self) -> str:
        return (
            f"{tuple(self.weight.shape)}, eps={self.epsilon}, convention={self.convention!r}, "
            f"replaces={self.original_class}"
        )


def _eps_attr(module: torch.nn.Module):
    for name in _EPS_ATTRS:
        if isinstance(getattr(module, name, None), float):
            return name
    return None


def _is_candidate(module: torch.nn.Module) -> bool:
    if isinstance(module, PatchedRMSNorm) or not type(module).__name__.endswith("RMSNorm"):
        return False
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1:
        return False
    if _eps_attr(module) is None:
        return False
    params = list(module.parameters(recurse=False))
    return (
        len(params) == 1
        and next(module.buffers(recurse=False), None) is None
        and next(module.children(), None) is None
    )


def _expected(x: torch.Tensor, weight: torch.Tensor, eps: float, convention: str) -> torch.Tensor:
    """A convention's output in float64, for the probe."""
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    w = weight.detach().double()
    return normed * (1.0 + w if convention == "gemma" else w)


def _expected_dtype(x: torch.Tensor, weight: torch.Tensor, convention: str) -> torch.dtype:
    return x.dtype if convention == "gemma" else torch.promote_types(weight.dtype, x.dtype)


@torch.no_grad()
def _probe(module: torch.nn.Module, eps: float):
    """The convention the module follows ("llama" or "gemma"), or None if neither."""
    weight = module.weight
    hidden = weight.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(0)
    x32 = torch.randn(4, hidden, generator=gen).to(weight.device)
    # float32 first (values), then a second dtype (the output dtype rule).
    other = torch.bfloat16 if weight.dtype == torch.float32 else torch.float32
    for convention in ("llama", "gemma"):
        ok = True
        for dtype in (torch.float32, other):
            x = x32.to(dtype)
            out = module(x)
            if out.dtype != _expected_dtype(x, weight, convention) or out.shape != x.shape:
                ok = False
                break
            want = _expected(x, weight, eps, convention)
            scale = want.abs().max().item() + 1e-30
            # Loose enough for bf16 weights and outputs, far tighter than the gap between the
            # conventions (which differ by 1 * normed in every element).
            if (out.double() - want).abs().max().item() > 2e-2 * scale + 1e-6:
                ok = False
                break
        if ok:
            return convention
    return None


def patch(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """Replace, in place, the RMSNorm modules of a transformers model with normkit ones.

    Returns ``{qualified name: original module}`` for every module replaced (a module shared
    under several names is replaced by one shared ``PatchedRMSNorm``). Already patched modules
    and modules whose behaviour matches neither convention are left as they are.
    """
    replaced: dict[str, torch.nn.Module] = {}
    decided: dict[int, PatchedRMSNorm | None] = {}  # id(original) -> its replacement
    original_of: dict[int, torch.nn.Module] = {}  # id(replacement made here) -> original
    for parent_name, parent in list(model.named_modules(remove_duplicate=False)):
        # parent._modules, not named_children(): that one hides a module's second name.
        for child_name, child in list(parent._modules.items()):
            qualified = f"{parent_name}.{child_name}" if parent_name else child_name
            if id(child) in original_of:  # reached again through a shared parent
                replaced[qualified] = original_of[id(child)]
                continue
            if child is None or not _is_candidate(child):
                continue
            if id(child) not in decided:
                eps_attr = _eps_attr(child)
                eps = float(getattr(child, eps_attr))
                if child.weight.device.type == "meta":
                    convention = KNOWN_CLASSES.get(type(child).__name__)
                else:
                    convention = _probe(child, eps)
                decided[id(child)] = (
                    None if convention is None else PatchedRMSNorm(child, eps_attr, convention)
                )
            patched = decided[id(child)]
            if patched is None:
                continue
            setattr(parent, child_name, patched)
            original_of[id(patched)] = child
            replaced[qualified] = child
    return replaced
