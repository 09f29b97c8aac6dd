"""normkit.torch.patch on small, randomly initialized Hugging Face transformers models (built
from a config; nothing is downloaded): the same logits and gradients before and after patching.

Tolerance: in float32 the two paths differ only by float32 rounding. In bfloat16 the
transformers norms round twice (Llama: the normalized value, then the product with the weight)
where normkit rounds once, so "within bf16 tolerance" is measured against a float32 run of the
unpatched model: the patched bf16 model must be about as close to it as the unpatched bf16 model.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
nt = pytest.importorskip("normkit.torch")

COMMON = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)

MODELS = {
    # name: (config class, model class, extra config, convention, norm class)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}, "llama", "LlamaRMSNorm"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}, "llama", "Qwen3RMSNorm"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}, "gemma", "GemmaRMSNorm"),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {"head_dim": 16, "sliding_window": 8},
        "gemma",
        "Gemma3RMSNorm",
    ),
}


def build(name, device, dtype=torch.float32, seed=0):
    cfg_name, model_name, extra, convention, _ = MODELS[name]
    config = getattr(transformers, cfg_name)(**COMMON, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config)
    # Random norm weights, so that w and 1 + w give different answers.
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                module.weight.normal_(0.0 if convention == "gemma" else 1.0, 0.3)
    return model.to(device=device, dtype=dtype)


def logits_and_grads(model, ids):
    model.zero_grad(set_to_none=True)
    logits = model(ids).logits
    # A loss that touches every logit with a different weight.
    gen = torch.Generator().manual_seed(5)
    probe = torch.randn(logits.shape, generator=gen).to(logits.device)
    (logits.float() * probe).sum().backward()
    grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach().float(), grads


def rel_err(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def count_norms(model, class_name):
    return sum(type(m).__name__ == class_name for m in model.modules())


@pytest.mark.parametrize("name", list(MODELS))
def test_float32_same_logits_and_grads(torch_device, name):
    model = build(name, torch_device)
    ids = torch.randint(0, COMMON["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1)).to(
        torch_device
    )
    before = logits_and_grads(model, ids)
    norm_class = MODELS[name][4]
    n_norms = count_norms(model, norm_class)
    keys = list(model.state_dict())
    weights = {n: p for n, p in model.named_parameters()}

    replaced = nt.patch(model)

    assert len(replaced) == n_norms > 0
    assert all(type(m).__name__ == norm_class for m in replaced.values())
    assert count_norms(model, norm_class) == 0
    assert all(m.convention == MODELS[name][3] for m in model.modules() if isinstance(m, nt.PatchedRMSNorm))
    assert list(model.state_dict()) == keys
    assert all(p is weights[n] for n, p in model.named_parameters())  # same Parameter objects
    after = logits_and_grads(model, ids)
    assert rel_err(after[0], before[0]) < 1e-5
    assert before[1].keys() == after[1].keys()
    for n in before[1]:
        assert rel_err(after[1][n], before[1][n]) < 1e-4, n
    assert nt.patch(model) == {}  # already patched


@pytest.mark.parametrize("name", ["llama", "gemma"])
def test_bfloat16_within_bf16_tolerance(torch_device, name):
    ids = torch.randint(0, COMMON["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(2)).to(
        torch_device
    )
    exact = logits_and_grads(build(name, torch_device, torch.float32), ids)
    model = build(name, torch_device, torch.bfloat16)
    hf = logits_and_grads(model, ids)
    assert len(nt.patch(model)) > 0
    ours = logits_and_grads(model, ids)
    hf_err, our_err = rel_err(hf[0], exact[0]), rel_err(ours[0], exact[0])
    assert our_err < 2 * hf_err + 1e-3, (
        f"logits: normkit bf16 error {our_err:.2e}, transformers bf16 {hf_err:.2e}"
    )
    for n in exact[1]:
        hf_err, our_err = rel_err(hf[1][n], exact[1][n]), rel_err(ours[1][n], exact[1][n])
        assert our_err < 2 * hf_err + 1e-2, (
            f"{n}: normkit bf16 error {our_err:.2e}, transformers bf16 {hf_err:.2e}"
        )


class CustomRMSNorm(torch.nn.Module):
    """Not a transformers class, but the same weight/eps contract (Llama convention)."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.3 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class LayerScaleRMSNorm(CustomRMSNorm):
    """Named like an RMSNorm but computes something else: must be left alone."""

    def forward(self, x):
        return super().forward(x) * 0.5


def test_unknown_classes_are_probed():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 16), CustomRMSNorm(16), torch.nn.Linear(16, 16), LayerScaleRMSNorm(16)
    )
    x = torch.randn(3, 16)
    before = model(x)
    replaced = nt.patch(model)
    assert list(replaced) == ["1"]
    assert isinstance(model[1], nt.PatchedRMSNorm) and isinstance(model[3], LayerScaleRMSNorm)
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)


def test_shared_module_replaced_once():
    norm = CustomRMSNorm(8)
    model = torch.nn.ModuleDict({"a": norm, "b": norm})
    replaced = nt.patch(model)
    assert set(replaced) == {"a", "b"} and model["a"] is model["b"]


def test_meta_device_uses_class_names():
    with torch.device("meta"):
        model = build("gemma", "meta")
    replaced = nt.patch(model)
    assert len(replaced) == 2 * COMMON["num_hidden_layers"] + 1
    assert all(m.convention == "gemma" for m in model.modules() if isinstance(m, nt.PatchedRMSNorm))
