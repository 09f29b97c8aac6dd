#!/usr/bin/env python3
"""Train a small, randomly initialized Hugging Face Llama with and without normkit.patch.

The same initial weights and the same batches are trained for --steps AdamW steps (lr 1e-4)
three times: plainly (the transformers LlamaRMSNorm), after normkit.torch.patch(model), and
plainly again (how far two plain runs drift apart on this device: the noise floor). Weights,
activations and optimizer state are bf16 (--dtype), so every RMSNorm runs normkit's bf16
kernels. Nothing is downloaded: the model comes from a LlamaConfig.

RMSNorm weights start at 1 + 0.1 * randn rather than transformers' exact 1 (see build_model).

Data: --batches distinct batches of random tokens (fixed seed), cycled, labels = inputs. A
small pool repeats, so the model memorizes it and the loss falls (on fresh random tokens
every curve would sit near ln(vocab), the same for right and wrong gradients).

Checks (exit status 1 when one fails):
- Loss curves: at every step |loss_normkit - loss_plain| <= --rel-tol * loss_plain (2e-2).
  normkit rounds each RMSNorm output once from float32 where LlamaRMSNorm rounds twice (the
  normalized value to bf16, then weight * it in bf16), so outputs differ by up to one bf16 ulp
  (2^-8 = 3.9e-3 relative) in about a quarter of the elements from the first step, and any
  such change compounds through the optimizer steps. Measured on a CPU: 9e-5 relative with
  the --small model, 3.3e-3 at step 20 with 8 layers of width 512; 2e-2 (five bf16 ulps)
  leaves room for the larger model and for GPU kernels. This check catches gross breakage
  (NaN, divergence), but 20 steps at lr 1e-4 barely respond to a moderately wrong gradient:
  a dx 20% too large moved the --small curve by only 5e-3.
- First-step gradients, the sensitive check: the same weights and first batch also go through
  a float32 copy of the model, and for every parameter tensor the error of normkit's bf16
  gradient against the float32 one, ||g - g32|| / ||g32||, must be at most --grad-factor (2)
  times the error of the plain bf16 run's gradient plus 1e-3: normkit may not make training
  gradients less accurate than transformers' own RMSNorm does. (Deliberately wrong normkit
  gradients: dx scaled by 1.02, dweight by 1.05, dweight zeroed: all fail it.)

Usage:  python bench/train_llama.py --json train.json          # GPU, the default model
        python bench/train_llama.py --small --device cpu       # a quick CPU run
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import platform
import statistics
import sys
import time

import torch
from torch_device import resolve_device

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
FULL = dict(hidden=1024, layers=8, heads=16, kv_heads=8, intermediate=2816, vocab=32000, seq=512, batch=8)
GRAD_FLOOR = 1e-3  # absolute slack of the gradient bound, for tensors whose plain error is tiny
SMALL = dict(hidden=256, layers=2, heads=4, kv_heads=2, intermediate=704, vocab=1000, seq=64, batch=4)


def build_model(size, dtype, device, seed, norm_noise):
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=size["vocab"], hidden_size=size["hidden"], intermediate_size=size["intermediate"],
        num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
        num_key_value_heads=size["kv_heads"], max_position_embeddings=max(2048, size["seq"]),
        rms_norm_eps=1e-6, tie_word_embeddings=False, use_cache=False,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    # transformers starts RMSNorm weights at exactly 1, where one rounding (normkit) and two
    # (LlamaRMSNorm) give the same bf16 outputs, and bf16 cannot move a weight of 1 by an
    # AdamW step of 1e-4 (its ulp is 2^-8), so they would stay 1 and a kernel that ignored the
    # weight would pass. Weights near 1 (as a trained model has) make the comparison real.
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                module.weight.copy_(1 + norm_noise * torch.randn(module.weight.shape, generator=gen))
    return model.to(device=device, dtype=dtype)


def make_batches(size, count, seed, device):
    gen = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=gen).to(device)
            for _ in range(count)]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, batches, steps, lr, device):
    """Per-step losses, per-step seconds, and the first step's gradients (float32, CPU)."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, times, first_grads = [], [], None
    for step in range(steps):
        ids = batches[step % len(batches)]
        sync(device)
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if step == 0:
            first_grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters()
                           if p.grad is not None}
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()  # synchronizes
        sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(value)
        if not math.isfinite(value):
            raise RuntimeError(f"loss is {value} at step {step + 1}")
    return losses, times, first_grads


def float32_reference(base, batch):
    """Loss and gradients of a float32 copy of the (untrained) model on the first batch."""
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 matmuls, not TF32 (torch's default)
    ref = copy.deepcopy(base).float()
    ref.train()
    loss = ref(input_ids=batch, labels=batch).loss
    loss.backward()
    grads = {n: p.grad.detach().float().cpu() for n, p in ref.named_parameters() if p.grad is not None}
    return loss.item(), grads


def grad_differences(a, b):
    """{name: ||a - b|| / ||b||} over the parameters both have."""
    out = {}
    for name, gb in b.items():
        ga = a.get(name)
        if ga is None or ga.shape != gb.shape:
            out[name] = math.inf
            continue
        denom = gb.norm().item()
        out[name] = (ga - gb).norm().item() / denom if denom > 0 else (0.0 if ga.norm().item() == 0 else math.inf)
    return out


def curve_stats(losses, baseline):
    abs_d = [abs(a - b) for a, b in zip(losses, baseline)]
    rel_d = [d / abs(b) if b else math.inf for d, b in zip(abs_d, baseline)]
    return {"max_abs_diff": max(abs_d), "max_rel_diff": max(rel_d),
            "worst_step": 1 + max(range(len(rel_d)), key=rel_d.__getitem__)}


def median_step_ms(times):
    body = times[1:] if len(times) > 1 else times  # step 1 is warm-up (allocations, cuBLAS setup)
    return 1e3 * statistics.median(body)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--small", action="store_true", help="a small model (the default on a CPU)")
    p.add_argument("--full", action="store_true", help="the full-size model even on a CPU")
    p.add_argument("--set", default="", metavar="KEY=N,...",
                   help=f"override model/data sizes, keys {sorted(FULL)} (e.g. layers=4,seq=128)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batches", type=int, default=2, help="distinct batches, cycled (default 2)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="weights and activations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rel-tol", type=float, default=2e-2, help="bound on |loss diff| / loss at any step")
    p.add_argument("--grad-factor", type=float, default=2.0,
                   help="normkit's first-step gradient error (against float32) may be at most this "
                        "times the plain run's, plus 1e-3, for every parameter (default 2)")
    p.add_argument("--norm-noise", type=float, default=0.1,
                   help="RMSNorm weights start at 1 + this * randn (default 0.1; 0: transformers' init)")
    p.add_argument("--no-repeat", action="store_true", help="skip the second plain run (noise floor)")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batches < 1:
        p.error("--steps and --batches must be positive")

    device = resolve_device(args.device, p)
    small = args.small or (device.type == "cpu" and not args.full)
    size = dict(SMALL if small else FULL)
    for item in filter(None, (i.strip() for i in args.set.split(","))):
        key, _, value = item.partition("=")
        if key not in size or not value.isdigit() or int(value) < 1:
            p.error(f"--set: bad item {item!r}; expected KEY=N with KEY in {sorted(FULL)}")
        size[key] = int(value)
    dtype = DTYPES[args.dtype]

    import normkit.torch as nk
    import transformers

    base = build_model(size, dtype, device, args.seed, args.norm_noise)
    initial = copy.deepcopy(base.state_dict())
    batches = make_batches(size, args.batches, args.seed, device)
    n_params = sum(p.numel() for p in base.parameters())
    print(f"train_llama: Llama {size} ({n_params / 1e6:.1f}M parameters, {args.dtype}, "
          f"attention {base.config._attn_implementation}) on {device}; {args.steps} steps, "
          f"AdamW lr {args.lr:g}, {args.batches} distinct batches", flush=True)

    loss32, grads32 = float32_reference(base, batches[0])
    runs = {}
    order = ["plain", "normkit"] + ([] if args.no_repeat else ["plain_repeat"])
    first_grads = {}
    replaced_count = 0
    for name in order:
        model = base if name == "plain" else copy.deepcopy(base)
        model.load_state_dict(initial)
        if name == "normkit":
            replaced = nk.patch(model)
            replaced_count = len(replaced)
            expected = 2 * size["layers"] + 1  # two per decoder layer and the final norm
            kinds = {type(m).__name__ for m in model.modules() if type(m).__name__.endswith("RMSNorm")}
            if replaced_count != expected or kinds != {"PatchedRMSNorm"}:
                print(f"train_llama: FAILED: patch replaced {replaced_count} modules (expected {expected}); "
                      f"RMSNorm classes left: {sorted(kinds)}", file=sys.stderr)
                return 1
        try:
            losses, times, grads = train(model, batches, args.steps, args.lr, device)
        except RuntimeError as e:  # a non-finite loss, or a kernel error
            print(f"train_llama: FAILED: the {name} run: {e}", file=sys.stderr)
            return 1
        first_grads[name] = grads
        runs[name] = {"losses": losses, "step_ms": [1e3 * t for t in times],
                      "median_step_ms": median_step_ms(times), "final_loss": losses[-1]}
        print(f"train_llama: {name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"median step {runs[name]['median_step_ms']:.1f} ms", flush=True)
        if model is not base:
            del model
        if device.type == "cuda":
            torch.cuda.empty_cache()

    vs_plain = curve_stats(runs["normkit"]["losses"], runs["plain"]["losses"])
    # Per parameter: error of each bf16 run's first-step gradient against the float32 model's.
    err_plain = grad_differences(first_grads["plain"], grads32)
    err_nk = grad_differences(first_grads["normkit"], grads32)
    bound = {n: args.grad_factor * err_plain[n] + GRAD_FLOOR for n in err_plain}
    grad_bad = sorted((n for n in err_plain if not err_nk[n] <= bound[n]), key=lambda n: -err_nk[n] / bound[n])
    worst = max(err_plain, key=lambda n: err_nk[n] / bound[n])
    noise = None
    if "plain_repeat" in runs:
        noise = curve_stats(runs["plain_repeat"]["losses"], runs["plain"]["losses"])
        noise["max_first_step_grad_rel_diff"] = max(grad_differences(first_grads["plain_repeat"],
                                                                     first_grads["plain"]).values())

    print("\nstep | plain loss | normkit loss | |diff| | rel diff")
    print("---|---|---|---|---")
    for i, (a, b) in enumerate(zip(runs["plain"]["losses"], runs["normkit"]["losses"])):
        print(f"{i + 1} | {a:.5f} | {b:.5f} | {abs(a - b):.2e} | {abs(a - b) / abs(a):.2e}")
    print(f"\nmax |loss difference|: {vs_plain['max_abs_diff']:.3e} "
          f"(relative {vs_plain['max_rel_diff']:.3e} at step {vs_plain['worst_step']}); tolerance {args.rel_tol:g} relative")
    if noise:
        print(f"plain vs plain again: max |loss difference| {noise['max_abs_diff']:.3e} "
              f"(relative {noise['max_rel_diff']:.3e}); first-step gradients {noise['max_first_step_grad_rel_diff']:.2e}")
    print(f"step-1 loss: float32 model {loss32:.5f}, plain {runs['plain']['losses'][0]:.5f}, "
          f"normkit {runs['normkit']['losses'][0]:.5f}")
    print(f"first-step gradient error vs float32 (||g - g32|| / ||g32||), median over {len(err_plain)} tensors: "
          f"plain {statistics.median(err_plain.values()):.2e}, normkit {statistics.median(err_nk.values()):.2e}; "
          f"closest to the bound: {worst}: normkit {err_nk[worst]:.2e}, plain {err_plain[worst]:.2e}, "
          f"bound {bound[worst]:.2e}")
    print(f"final loss: plain {runs['plain']['final_loss']:.5f}, normkit {runs['normkit']['final_loss']:.5f}")
    print(f"median step time (steps 2..{args.steps}, synchronized): plain {runs['plain']['median_step_ms']:.2f} ms, "
          f"normkit {runs['normkit']['median_step_ms']:.2f} ms "
          f"({runs['plain']['median_step_ms'] / runs['normkit']['median_step_ms']:.3f}x)")

    failures = []
    if not vs_plain["max_rel_diff"] <= args.rel_tol:
        failures.append(f"loss curves differ by {vs_plain['max_rel_diff']:.3e} relative "
                        f"(step {vs_plain['worst_step']}) > {args.rel_tol:g}")
    for n in grad_bad[:5]:
        failures.append(f"first-step gradient of {n}: error {err_nk[n]:.3e} vs float32 > bound {bound[n]:.3e} "
                        f"(plain's error {err_plain[n]:.3e})")
    if len(grad_bad) > 5:
        failures.append(f"... and {len(grad_bad) - 5} more parameter gradients")

    if args.json:
        doc = {
            "tool": "bench/train_llama.py",
            "command": " ".join([sys.executable] + sys.argv),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "normkit": __import__("normkit").__version__, "python": platform.python_version()},
            "model": {**size, "parameters": n_params, "dtype": args.dtype,
                      "attention": base.config._attn_implementation, "patched_modules": replaced_count},
            "training": {"steps": args.steps, "optimizer": "AdamW", "lr": args.lr, "seed": args.seed,
                         "distinct_batches": args.batches, "norm_weight_init": f"1 + {args.norm_noise:g} * randn"},
            "runs": runs,
            "normkit_vs_plain": {**vs_plain, "rel_tol": args.rel_tol},
            "first_step_vs_float32": {
                "float32_loss": loss32, "grad_factor": args.grad_factor, "grad_floor": GRAD_FLOOR,
                "grad_rel_err": {n: {"plain": err_plain[n], "normkit": err_nk[n], "bound": bound[n]}
                                 for n in err_plain}},
            "plain_vs_plain": noise,
            "failures": failures,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"train_llama: wrote {args.json}")

    if failures:
        print("train_llama: FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    print("train_llama: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
