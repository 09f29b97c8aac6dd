#!/usr/bin/env python3
"""normkit against its peers, in one process on one device: RMSNorm forward and backward.

Implementations (each checked once per shape against a float64 reference):
  normkit        normkit.torch.rms_norm (the torch custom op, with autograd for the backward)
  normkit_op     torch.ops.normkit.rms_norm_fwd / rms_norm_bwd called directly (no autograd):
                 the kernels plus the op binding
  torch_eager    torch.nn.functional.rms_norm
  torch_compile  torch.compile of the Hugging Face LlamaRMSNorm composite
  jax_jit        jax.jit of the same composite (jax.vjp for the backward)

Timing follows /work/shared/PEERS.md: for torch callables, CUDA events around one call with
the L2 cache flushed before each call, median after warm-up (triton.testing.do_bench with
warmup=25 ms, rep=100 ms, return_mode="median"; an equivalent timer here when triton is
missing). JAX has no CUDA-event hook, so its figure is the wall-clock time of one call of the
compiled function up to block_until_ready (dispatch included), L2 flushed before each call,
median of --reps. Backward of the torch implementations is torch.autograd.grad on a retained
graph. The device-to-device copy bandwidth (dst.copy_(src), bytes read + written) is measured
in the same run. On a CPU every timing is wall-clock (a smoke test, not a benchmark).

Usage:  python bench/compare.py --json compare.json            # the PEERS.md sweep on the GPU
        python bench/compare.py --device cpu --shapes 64x1024,29x71
"""

from __future__ import annotations

import os

# JAX would otherwise reserve 75% of the GPU at its first use and starve torch.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch_device import resolve_device  # noqa: E402

# The sweep of PEERS.md, in its order.
PEER_SHAPES = [
    (29, 17389), (256, 65536), (1024, 32768), (2048, 16384), (4096, 1024), (4096, 12288),
    (8192, 2048), (8192, 4096), (8192, 8192), (16384, 4096), (1, 4096), (128, 4096),
    (4096, 4096), (32768, 8192), (16384, 7168),
]
# The norms of current LLMs that the sweep leaves out: the "models" set of `normkit bench
# --shapes` (tools/shapes.cpp says which model each comes from; a test keeps the two equal).
MODEL_SHAPES = [
    (131072, 128), (32768, 128), (2048, 128), (65536, 256), (16384, 512), (16384, 1536),
    (16384, 896), (16384, 1152), (8192, 2304), (8192, 2560), (8192, 3584), (8192, 5120),
    (4096, 5376), (4096, 6144),
]
SHAPE_SETS = {"sweep": PEER_SHAPES, "models": MODEL_SHAPES}
# A CPU run is a smoke test of the script: small and awkward shapes.
CPU_SHAPES = [(29, 1737), (1, 4096), (128, 1024), (64, 4096), (7, 71)]

IMPLS = ["normkit", "normkit_op", "torch_eager", "torch_compile", "jax_jit"]
LABELS = {
    "normkit": "normkit",
    "normkit_op": "normkit op",
    "torch_eager": "torch F.rms_norm",
    "torch_compile": "torch.compile (HF composite)",
    "jax_jit": "JAX jit (HF composite, wall-clock)",
}
SHORT = {"normkit": "normkit", "normkit_op": "normkit op", "torch_eager": "eager",
         "torch_compile": "compile", "jax_jit": "JAX"}  # table headers
PEERS = ["torch_eager", "torch_compile", "jax_jit"]  # normkit's speedup is shown over these
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
MAX_REL_ERR = 1e-2  # bf16 rounding gives about 2e-3; anything past 1e-2 is a wrong result
FLUSH_BYTES = 256 << 20
# normkit bench's rule (tools/timing.h, spread_too_wide_us): a median more than 15% and more
# than 2 µs above the fastest sample does not stand for the call; the run was disturbed.
UNSTEADY_RELATIVE, UNSTEADY_ABSOLUTE_US = 1.15, 2.0
# What a near-empty op reads under the events method on an idle host (about 4 µs on the H100);
# past this the host falls behind the GPU and small-shape figures time the host.
HOST_PROBE_WARN_US = 8.0


def sample_stats(samples_us) -> dict:
    """median, min and nearest-rank p90 of timings in µs, and whether they are steady."""
    ordered = sorted(samples_us)
    median = statistics.median(ordered)
    p90 = ordered[max(math.ceil(0.9 * len(ordered)), 1) - 1]
    steady = not (median > UNSTEADY_RELATIVE * ordered[0]
                  and median - ordered[0] > UNSTEADY_ABSOLUTE_US)
    return {"median_us": median, "min_us": ordered[0], "p90_us": p90, "steady": steady}


DTYPE_NAME = ["bf16"]  # for the table titles; set from --dtype


# ----------------------------------------------------------------------------- timing


@functools.cache
def l2_demoter():
    """normkit's _C.cuda_demote_l2 (nk_cuda_demote_l2) where its CUDA build sees a device, else
    None. normkit's kernels read inputs evict-last, and such L2 lines outlive a zero_() flush."""
    try:
        from normkit import _C

        return _C.cuda_demote_l2 if _C.cuda_device_count() > 0 else None
    except (ImportError, AttributeError):
        return None


def demote_l2(tensors) -> bool:
    """Gives the tensors' cached L2 lines normal eviction priority, on the current stream, so
    that a flush that follows evicts them (a no-op for lines read without a hint). False where
    normkit's CUDA build is not there to do it."""
    demote = l2_demoter()
    if demote is None:
        return False
    stream = torch.cuda.current_stream().cuda_stream
    for t in tensors:
        demote(t.data_ptr(), t.numel() * t.element_size(), stream)
    return True


class Timer:
    """Median time of one call, in microseconds: CUDA events (do_bench) or wall clock."""

    def __init__(self, device: torch.device, reps: int):
        self.device = device
        self.reps = reps
        self.cuda = device.type == "cuda"
        self._flush_buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device) if self.cuda else None
        self._do_bench = None
        self.last_stats = None  # sample_stats of the last timing, where its samples were kept
        # With normkit's CUDA build present, every implementation is timed by our own loop,
        # which demotes the inputs' L2 lines before each flush (demote_l2), so that no input
        # survives the flush, whoever read it last; else do_bench, as before.
        self._demote = self.cuda and l2_demoter() is not None
        if self.cuda and not self._demote:
            try:
                from triton.testing import do_bench

                self._do_bench = do_bench
            except Exception:  # noqa: BLE001 - any import failure means: use our own timer
                self._do_bench = None

    def events_method(self) -> str:
        if not self.cuda:
            return f"wall clock around one call, median of {self.reps} after warm-up (CPU)"
        if self._demote:
            return ("CUDA events around one call, L2 flushed before each call (the inputs' L2 "
                    "lines set to normal eviction priority, then 256 MiB zeroed), 25 ms of "
                    "warm-up, calls for 100 ms, median (do_bench's procedure)")
        if self._do_bench is not None:
            return ('triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"): CUDA '
                    "events around one call, L2 flushed (256 MiB zeroed) before each call, 25 ms of "
                    "warm-up, calls for 100 ms (at least 1), median")
        return ("CUDA events around one call, L2 flushed (256 MiB zeroed) before each call, "
                "25 ms of warm-up, calls for 100 ms, median (triton not importable)")

    def wall_method(self) -> str:
        flush = "L2 flushed (256 MiB zeroed, synchronized) before each call, " if self.cuda else ""
        return (f"wall clock of one call up to block_until_ready, {flush}"
                f"median of {self.reps} after warm-up; includes dispatch")

    def flush(self):
        if self.cuda:
            self._flush_buf.zero_()
            torch.cuda.synchronize(self.device)

    def events(self, fn, inputs=()) -> float:
        """fn queues device work on the current stream (torch); inputs: the tensors it reads."""
        if not self.cuda:
            return self.wall(fn)
        if self._do_bench is not None:
            self.last_stats = None  # (do_bench gives the median alone)
            return 1e3 * self._do_bench(fn, warmup=25, rep=100, return_mode="median")
        return self._own_events(fn, inputs)

    def _flush_l2(self, inputs) -> None:
        demote_l2(inputs)
        self._flush_buf.zero_()

    def _own_events(self, fn, inputs=(), warmup_ms=25.0, rep_ms=100.0) -> float:
        """The do_bench procedure, with the inputs demoted before each flush where normkit's
        CUDA build is present; also for machines without triton."""
        fn()
        torch.cuda.synchronize(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            self._flush_l2(inputs)
            fn()
        end.record()
        torch.cuda.synchronize(self.device)
        estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)
        for _ in range(max(1, int(warmup_ms / estimate_ms))):
            fn()
        n = max(1, int(rep_ms / estimate_ms))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self._flush_l2(inputs)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize(self.device)
        self.last_stats = sample_stats([1e3 * s.elapsed_time(e) for s, e in zip(starts, ends)])
        return self.last_stats["median_us"]

    def wall(self, fn) -> float:
        """fn must return only when its work is done (block_until_ready, or CPU torch)."""
        deadline = time.perf_counter() + 0.025
        for i in range(100):  # warm-up: at least 3 calls, about 25 ms
            fn()
            if i >= 2 and time.perf_counter() > deadline:
                break
        times = []
        for _ in range(self.reps):
            self.flush()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        self.last_stats = sample_stats([1e6 * t for t in times])
        return self.last_stats["median_us"]


def copy_bandwidth(device: torch.device, timer: Timer) -> dict:
    """Device-to-device copy, bytes read + written: the ceiling for a memory-bound kernel."""
    nbytes = (512 << 20) if device.type == "cuda" else (64 << 20)
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    us = timer.events(lambda: dst.copy_(src))
    if not torch.equal(dst, src):
        raise RuntimeError("copy bandwidth: the copy is wrong")
    return {"gbps": 2 * nbytes / (us * 1e-6) / 1e9, "buffer_bytes": nbytes, "median_us": us,
            "method": f"dst.copy_(src) of {nbytes >> 20} MiB, bytes read + written; "
                      + timer.events_method()}


def host_probe(device: torch.device, timer: Timer) -> float | None:
    """µs that the events method gives a one-element add_ (None on a CPU): the floor under every
    small shape, about 4 µs where the host keeps ahead of the GPU."""
    if device.type != "cuda":
        return None
    probe = torch.zeros(1, device=device)
    return timer.events(lambda: probe.add_(1), (probe,))


# ------------------------------------------------------------------- reference and checks


def reference(x, w, dy, eps):
    """float64 y, dx and dweight of y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps)."""
    x64, w64, dy64 = x.double(), w.double(), dy.double()
    rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    xhat = x64 * rstd
    y = xhat * w64
    dw = (dy64 * xhat).sum(0)
    g = dy64 * w64
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return y, dx, dw


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (NaN or a wrong shape count as infinite error)."""
    if tuple(out.shape) != tuple(ref.shape):
        return math.inf
    out = out.to(ref.device, torch.float64)
    err = ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
    return err if math.isfinite(err) else math.inf


# ------------------------------------------------------------------------ implementations


def hf_composite(eps):
    """The Hugging Face LlamaRMSNorm forward as a function (what torch.compile sees)."""

    def f(x, w):
        dtype = x.dtype
        h = x.float()
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + eps)
        return w * h.to(dtype)

    return f


def torch_cases(name, x, w, dy, eps):
    """(fwd_fn, bwd_fn) for a torch implementation: each returns its outputs (y) or (dx, dw)."""
    n = x.shape[-1]
    if name == "normkit":
        import normkit.torch as nk

        def f(a, b):
            return nk.rms_norm(a, b, eps)
    elif name == "normkit_op":
        import normkit.torch  # noqa: F401  (registers torch.ops.normkit)

        fwd_op, bwd_op = torch.ops.normkit.rms_norm_fwd, torch.ops.normkit.rms_norm_bwd
        _, _, rstd = fwd_op(x, w, None, None, eps, False, None)

        def fwd():
            return fwd_op(x, w, None, None, eps, False, None)[0]

        def bwd():
            dx, dw, _ = bwd_op(dy, x, rstd, w, None, False, True, False, w.dtype)
            return dx, dw

        bwd.inputs = (rstd,)  # (read beside x, w and dy: Timer demotes it before each flush)
        return fwd, bwd
    elif name == "torch_eager":

        def f(a, b):
            return torch.nn.functional.rms_norm(a, (n,), b, eps)
    elif name == "torch_compile":
        # A fresh cache per shape: static shapes (a kernel specialized to each shape, as a
        # model with fixed sizes gets) and no recompile limit across the sweep.
        torch._dynamo.reset()
        f = torch.compile(hf_composite(eps), dynamic=False)
    else:
        raise ValueError(name)

    def fwd():
        return f(x, w)

    xg = x.detach().clone().requires_grad_(True)
    wg = w.detach().clone().requires_grad_(True)
    state = {}

    def bwd():
        if "y" not in state:  # the graph is built once and retained, as PEERS.md did
            state["y"] = f(xg, wg)
        return torch.autograd.grad(state["y"], (xg, wg), dy, retain_graph=True)

    bwd.inputs = (xg, wg)  # (what the graph saved; its rstd, rows * 4 bytes, is not reachable)
    return fwd, bwd


class Jax:
    """jax.jit of the HF composite on the device torch uses; inputs copied in once per shape."""

    def __init__(self, device: torch.device):
        import jax
        import jax.numpy as jnp
        import numpy as np

        self.jax, self.jnp, self.np = jax, jnp, np
        platform_name = "gpu" if device.type == "cuda" else "cpu"
        devices = jax.devices(platform_name)  # raises when JAX has no such backend
        index = torch.cuda.current_device() if device.type == "cuda" else 0
        self.device = devices[index]
        self.torch_device = device

    def to_jax(self, t: torch.Tensor):
        jdtype = {torch.bfloat16: self.jnp.bfloat16, torch.float16: self.jnp.float16,
                  torch.float32: self.jnp.float32}[t.dtype]
        # float32 holds every bf16/fp16 value exactly, so the round trip keeps the inputs.
        host = t.detach().float().cpu().numpy()
        return self.jax.device_put(host, self.device).astype(jdtype)

    def to_torch(self, a) -> torch.Tensor:
        return torch.from_numpy(self.np.array(a.astype(self.jnp.float32))).to(self.torch_device)  # a writable copy

    def cases(self, x, w, dy, eps):
        jax, jnp = self.jax, self.jnp

        def f(a, b):
            h = a.astype(jnp.float32)
            var = jnp.mean(h * h, axis=-1, keepdims=True)
            h = h * jax.lax.rsqrt(var + eps)
            return b * h.astype(a.dtype)

        fwd_jit = jax.jit(f)
        bwd_jit = jax.jit(lambda a, b, g: jax.vjp(f, a, b)[1](g))
        xj, wj, dyj = self.to_jax(x), self.to_jax(w), self.to_jax(dy)

        def fwd():
            return jax.block_until_ready(fwd_jit(xj, wj))

        def bwd():
            return jax.block_until_ready(bwd_jit(xj, wj, dyj))

        return fwd, bwd


# ----------------------------------------------------------------------------- the sweep


def short_error(e: BaseException) -> str:
    if isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower() \
            or "RESOURCE_EXHAUSTED" in str(e):
        return "OOM"
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:120].replace("|", "/")  # no markdown cell breaks


def free_memory(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def poison_allocator(rows, hidden, dtype, device):
    """Leave NaN-filled blocks of the output sizes in torch's allocator cache, so an output
    element a kernel fails to write reads as NaN (not as a stale correct value of another
    implementation that used the same memory before) and fails the check. Best effort: the
    allocator (torch's on a GPU, malloc on a CPU) usually hands a freed block of the same
    size to the next request."""
    blocks = [torch.full((rows, hidden), math.nan, dtype=dtype, device=device) for _ in range(3)]
    blocks += [torch.full((n,), math.nan, dtype=t, device=device)
               for n in (hidden, rows) for t in (dtype, torch.float32)]
    del blocks


def measure_shape(rows, hidden, args, device, dtype, timer, jax_state, copy_gbps):
    elem = torch.empty((), dtype=dtype).element_size()
    fwd_bytes = (2 * rows * hidden + hidden) * elem
    bwd_bytes = (3 * rows * hidden + 2 * hidden) * elem
    result = {"rows": rows, "hidden": hidden,
              "fwd": {"bytes": fwd_bytes, "impls": {}}, "bwd": {"bytes": bwd_bytes, "impls": {}}}
    gen = torch.Generator(device=device).manual_seed(args.seed * 1000003 + rows * 7 + hidden)
    x = torch.randn(rows, hidden, generator=gen, device=device, dtype=torch.float32).to(dtype)
    w = (1 + 0.1 * torch.randn(hidden, generator=gen, device=device)).to(dtype)
    dy = torch.randn(rows, hidden, generator=gen, device=device, dtype=torch.float32).to(dtype)
    ref_y, ref_dx, ref_dw = reference(x, w, dy, args.eps)

    for name in args.impls:
        fwd = bwd = None
        try:
            if name == "jax_jit":
                if isinstance(jax_state, str):  # JAX could not start: say why in every cell
                    for d in ("fwd", "bwd"):
                        result[d]["impls"][name] = {"error": jax_state}
                    continue
                fwd, bwd = jax_state.cases(x, w, dy, args.eps)
                to_torch, time_fn = jax_state.to_torch, timer.wall
            else:
                fwd, bwd = torch_cases(name, x, w, dy, args.eps)
                def to_torch(t):
                    return t

                def time_fn(fn, shared=(x, w, dy)):
                    return timer.events(fn, (*shared, *getattr(fn, "inputs", ())))
        except Exception as e:  # noqa: BLE001 - one implementation failing must not end the sweep
            for d in ("fwd", "bwd"):
                result[d]["impls"][name] = {"error": short_error(e)}
            free_memory(device)
            continue
        for direction, fn, nbytes in (("fwd", fwd, fwd_bytes), ("bwd", bwd, bwd_bytes)):
            entry = {}
            try:
                poison_allocator(rows, hidden, dtype, device)
                out = fn()  # also compiles / warms up
                if direction == "fwd":
                    entry["rel_err"] = rel_err(to_torch(out), ref_y)
                else:
                    entry["rel_err_dx"] = rel_err(to_torch(out[0]), ref_dx)
                    entry["rel_err_dw"] = rel_err(to_torch(out[1]), ref_dw)
                    entry["rel_err"] = max(entry["rel_err_dx"], entry["rel_err_dw"])
                del out
                us = time_fn(fn)
                gbps = nbytes / (us * 1e-6) / 1e9
                entry.update(median_us=us, gbps=gbps, percent_of_copy=100 * gbps / copy_gbps)
                if timer.last_stats is not None:
                    entry.update({k: timer.last_stats[k] for k in ("min_us", "p90_us", "steady")})
                if not entry["rel_err"] <= MAX_REL_ERR:
                    entry["check_failed"] = True
            except Exception as e:  # noqa: BLE001
                entry = {"error": short_error(e), **{k: v for k, v in entry.items() if k.startswith("rel")}}
            result[direction]["impls"][name] = entry
        del fwd, bwd
        free_memory(device)
    del x, w, dy, ref_y, ref_dx, ref_dw
    free_memory(device)
    return result


# ------------------------------------------------------------------------------- report


def fmt_us(entry) -> str:
    if entry is None:
        return "–"
    if "error" in entry:
        return f"n/a ({entry['error']})"
    cell = f"{entry['median_us']:.1f}"
    if entry.get("steady") is False:
        cell += f" (unsteady: min {entry['min_us']:.1f})"
    if entry.get("check_failed"):
        cell += f" (WRONG: rel err {entry['rel_err']:.1e})"
    return cell


def speedup(nk, peer) -> str:
    if not nk or not peer or "median_us" not in nk or "median_us" not in peer:
        return "–"
    return f"{peer['median_us'] / nk['median_us']:.2f}×"


def fmt_gbps(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def markdown_table(results, direction, impls) -> str:
    title = {"fwd": "Forward", "bwd": "Backward (dx and dweight)"}[direction]
    cols = ["rows × hidden"] + [f"{SHORT[i]} µs" for i in impls]
    nk_cols = [i for i in ("normkit", "normkit_op") if i in impls]
    for i in nk_cols:
        cols += [f"{SHORT[i]} GB/s", f"{SHORT[i]} % of copy"]
    peers = [p for p in PEERS if p in impls]
    if "normkit" in impls:
        cols += [f"normkit speedup vs {SHORT[p]}" for p in peers]
    lines = [f"### {title}, {DTYPE_NAME[0]}, microseconds (median)", "",
             "; ".join(f"{SHORT[i]} = {LABELS[i]}" for i in impls), "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in results:
        shape = f"{r['rows']}×{r['hidden']}"
        if "error" in r:
            lines.append(f"| {shape} | " + " | ".join([f"n/a ({r['error']})"] * (len(cols) - 1)) + " |")
            continue
        ent = r[direction]["impls"]
        cells = [shape] + [fmt_us(ent.get(i)) for i in impls]
        for i in nk_cols:
            e = ent.get(i, {})
            cells += ([fmt_gbps(e["gbps"]), f"{e['percent_of_copy']:.0f}%"] if "gbps" in e else ["–", "–"])
        if "normkit" in impls:
            cells += [speedup(ent.get("normkit"), ent.get(p)) for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def versions() -> dict:
    v = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("normkit", "jax", "jaxlib", "triton", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            v[mod] = f"n/a ({short_error(e)})"
    try:
        import normkit

        v["normkit_build"] = normkit.version()
    except Exception:  # noqa: BLE001
        pass
    return v


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return f"{p.name} (device {device.index or 0}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB)"
    return f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores"


def parse_shapes(text: str):
    shapes = []
    for item in text.split(","):
        item = item.strip().lower()
        if item in SHAPE_SETS:
            shapes.extend(SHAPE_SETS[item])
            continue
        try:
            rows, hidden = (int(v) for v in item.split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad shape {item!r}: expected ROWSxHIDDEN, e.g. 4096x4096, "
                                             f"or a shape set ({', '.join(SHAPE_SETS)})")
        if rows < 1 or hidden < 1:
            raise argparse.ArgumentTypeError(f"bad shape {item!r}: sizes must be positive")
        shapes.append((rows, hidden))
    return shapes


def parse_impls(text: str):
    impls = [i.strip() for i in text.split(",") if i.strip()]
    bad = [i for i in impls if i not in IMPLS]
    if bad or not impls:
        raise argparse.ArgumentTypeError(f"unknown implementation(s) {bad}; choose from {IMPLS}")
    return impls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:N or cpu")
    p.add_argument("--shapes", type=parse_shapes, default=None,
                   help="ROWSxHIDDEN items and shape sets (sweep, models), comma-separated "
                        "(default: sweep on a GPU, small shapes on a CPU)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--impls", type=parse_impls, default=IMPLS, help=f"comma list of {IMPLS}")
    p.add_argument("--reps", type=int, default=None,
                   help="repetitions of the wall-clock timings (default 100; 10 on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)

    device = resolve_device(args.device, p)
    dtype = DTYPES[args.dtype]
    DTYPE_NAME[0] = args.dtype
    shapes = args.shapes or (PEER_SHAPES if device.type == "cuda" else CPU_SHAPES)
    reps = args.reps or (100 if device.type == "cuda" else 10)
    timer = Timer(device, reps)
    started = time.perf_counter()

    jax_state = "not requested"
    if "jax_jit" in args.impls:
        try:
            jax_state = Jax(device)
        except Exception as e:  # noqa: BLE001
            jax_state = f"no JAX: {short_error(e)}"
            print(f"compare: {jax_state}", file=sys.stderr)

    print(f"compare: measuring the copy bandwidth on {device_name(device)}...", flush=True)
    copy = copy_bandwidth(device, timer)
    print(f"compare: copy {copy['gbps']:.1f} GB/s", flush=True)
    probe_start = host_probe(device, timer)

    results = []
    for k, (rows, hidden) in enumerate(shapes):
        t0 = time.perf_counter()
        try:
            r = measure_shape(rows, hidden, args, device, dtype, timer, jax_state, copy["gbps"])
        except Exception as e:  # noqa: BLE001 - e.g. the inputs themselves do not fit
            r = {"rows": rows, "hidden": hidden, "error": short_error(e)}
            free_memory(device)
        results.append(r)
        errs = ""
        if "error" not in r:
            errs = ", ".join(
                f"{d} {i} {r[d]['impls'][i]['rel_err']:.1e}"
                for d in ("fwd", "bwd") for i in args.impls if "rel_err" in r[d]["impls"].get(i, {}))
        print(f"compare: [{k + 1}/{len(shapes)}] {rows}x{hidden} in {time.perf_counter() - t0:.1f} s; "
              f"rel err: {errs or r.get('error')}", flush=True)

    probe_end = host_probe(device, timer)
    probes = [v for v in (probe_start, probe_end) if v is not None]
    jax_desc = (f"jax {jax_state.device.platform}:{jax_state.device.id} ({jax_state.device.device_kind})"
                if not isinstance(jax_state, str) else jax_state)
    header = [
        f"normkit vs peers: {args.dtype}, random inputs, weight 1 + 0.1*randn, eps {args.eps:g}",
        f"device: {device_name(device)}; {jax_desc}",
        f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"copy bandwidth: {copy['gbps']:.1f} GB/s ({copy['method']})",
        f"timing (torch): {timer.events_method()}",
        f"timing (JAX): {timer.wall_method()}",
        "bytes: fwd (2*M*N + N) * size, bwd (3*M*N + 2*N) * size (rstd not counted); "
        "torch backward = torch.autograd.grad on a retained graph",
        f"checked against float64: max|out - ref| / max|ref| must be <= {MAX_REL_ERR:g}",
    ]
    if probes:
        header.append(f"host probe: a one-element add_ reads {probe_start:.1f} µs before the shapes and "
                      f"{probe_end:.1f} µs after (about 4 on an idle host; above {HOST_PROBE_WARN_US:g} the "
                      "host falls behind the GPU)")
    header.append(f"(unsteady: median over {UNSTEADY_RELATIVE * 100 - 100:.0f}% and "
                  f"{UNSTEADY_ABSOLUTE_US:g} µs above the fastest call: a disturbed figure, measure again)")
    print()
    print("\n".join(header))
    for d in ("fwd", "bwd"):
        print()
        print(markdown_table(results, d, args.impls))

    # normkit wrong or not running fails the script; a peer past the bound is reported loudly
    # (it is a finding about the peer, and its timing is still worth having).
    failures, peer_warnings = [], []
    for r in results:
        if "error" in r:
            failures.append(f"{r['rows']}x{r['hidden']}: {r['error']}")
            continue
        for d in ("fwd", "bwd"):
            for i, e in r[d]["impls"].items():
                where = f"{r['rows']}x{r['hidden']} {d} {i}"
                bad = "rel_err" in e and not e["rel_err"] <= MAX_REL_ERR
                if bad:
                    detail = ", ".join(f"{k} {e[k]:.2e}" for k in ("rel_err_dx", "rel_err_dw") if k in e)
                    msg = f"{where}: rel err {e['rel_err']:.2e} > {MAX_REL_ERR:g}" + (f" ({detail})" if detail else "")
                    (failures if i.startswith("normkit") else peer_warnings).append(msg)
                elif i.startswith("normkit") and "error" in e:
                    failures.append(f"{where}: {e['error']}")
    print(f"\ncompare: {len(shapes)} shapes in {time.perf_counter() - started:.0f} s")

    if args.json:
        doc = {
            "tool": "bench/compare.py",
            "command": " ".join([sys.executable] + sys.argv),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "device": device_name(device),
            "jax_device": jax_desc,
            "versions": versions(),
            "dtype": args.dtype,
            "eps": args.eps,
            "timing": {"torch": timer.events_method(), "jax": timer.wall_method()},
            "bytes": {"fwd": "(2*rows*hidden + hidden) * size", "bwd": "(3*rows*hidden + 2*hidden) * size"},
            "max_rel_err": MAX_REL_ERR,
            "impls": {i: LABELS[i] for i in args.impls},
            "copy": copy,
            "host_probe_us": {"start": probe_start, "end": probe_end},
            "shapes": results,
            "failures": failures,
            "peer_check_failures": peer_warnings,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"compare: wrote {args.json}")

    if probes and max(probes) > HOST_PROBE_WARN_US:
        print(f"\ncompare: WARNING: the host probe read {max(probes):.1f} µs (about 4 on an idle "
              "host): the host fell behind the GPU, and figures of small shapes time the host, "
              "for every implementation; run again on a quiet machine", file=sys.stderr)
    unsteady = [f"{r['rows']}x{r['hidden']} {d} {i}" for r in results if "error" not in r
                for d in ("fwd", "bwd") for i, e in r[d]["impls"].items() if e.get("steady") is False]
    if unsteady:
        print(f"\ncompare: WARNING: {len(unsteady)} unsteady figure(s) (marked above): "
              + ", ".join(unsteady), file=sys.stderr)
    if peer_warnings:
        print("\ncompare: WARNING: peer outputs off the float64 reference by more than "
              f"{MAX_REL_ERR:g} (marked WRONG above):\n  " + "\n  ".join(peer_warnings), file=sys.stderr)
    if failures:
        print("\ncompare: FAILED (normkit):\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
