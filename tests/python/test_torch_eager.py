"""The eager fast path of normkit.torch (python/normkit/torch/_eager.py).

It must be taken in plain eager calls, never under torch.compile, tracers, functorch transforms,
dispatch or torch-function modes or with tensor subclasses (the custom op runs there), and its
outputs and gradients must be bitwise identical to the custom op's. Spies count the calls of
the custom ops and the C API calls made outside them, so a test cannot pass by silently taking
the other path. The ops' own raw-pointer calls are checked against their DLPack calls here too.
"""

from __future__ import annotations

import collections

import pytest

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normkit.torch")

from normkit import _C  # noqa: E402
from normkit.torch import _eager, _ops  # noqa: E402
from torch_modes import DispatchLog, FunctionLog  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    """Counts of what ran, by path:

    'op_fwd'/'op_bwd'      calls of the custom ops' real implementations (_ops._fwd_impl/_bwd_impl)
    'fast_fwd'/'fast_bwd'  C API calls the eager fast path made itself (outside the ops)
    'c_fwd'/'c_bwd'        every C API call, through the raw-pointer or the DLPack entry point
    'dlpack_fwd'/'dlpack_bwd'  the C API calls through the DLPack entry points

    The ops call the C API through the same raw-pointer entry points as the fast path, so a
    C API call counts as the fast path's only when no op implementation is running.
    """
    counts = collections.Counter()
    inside_op = [0]

    def op_spy(name, fn):
        def spy(*args, **kwargs):
            counts[name] += 1
            inside_op[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                inside_op[0] -= 1

        return spy

    def c_spy(kind, fn, dlpack=False):
        def spy(*args, **kwargs):
            counts["c_" + kind] += 1
            if dlpack:
                counts["dlpack_" + kind] += 1
            if not inside_op[0]:
                counts["fast_" + kind] += 1
            return fn(*args, **kwargs)

        return spy

    monkeypatch.setattr(_ops, "_fwd_impl", op_spy("op_fwd", _ops._fwd_impl))
    monkeypatch.setattr(_ops, "_bwd_impl", op_spy("op_bwd", _ops._bwd_impl))
    monkeypatch.setattr(_eager, "_fwd_ptr", c_spy("fwd", _eager._fwd_ptr))
    monkeypatch.setattr(_eager, "_bwd_ptr", c_spy("bwd", _eager._bwd_ptr))
    monkeypatch.setattr(_C, "rms_norm_fwd", c_spy("fwd", _C.rms_norm_fwd, dlpack=True))
    monkeypatch.setattr(_C, "rms_norm_bwd", c_spy("bwd", _C.rms_norm_bwd, dlpack=True))
    return counts


def bits(t):
    """The tensor's bit patterns, so that comparisons are exact (signed zeros, NaN payloads)."""
    t = t.detach().contiguous()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def assert_bitwise_equal(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert torch.equal(bits(a), bits(b)), f"{what} differs between the eager path and the custom op"


# name -> (weight dtype: None/"x"/dtype, bias, residual, zero_centered, out_dtype: "x"/dtype)
CONFIGS = {
    "plain": ("x", False, False, False, "x"),
    "no_weight": (None, False, False, False, "x"),
    "fp32_weight": (torch.float32, False, False, False, "x"),
    "bias": ("x", True, False, False, "x"),
    "bias_only": (None, True, False, False, "x"),
    "residual": ("x", False, True, False, "x"),
    "gemma_residual_bias": ("x", True, True, True, "x"),
    "out_fp32": ("x", False, False, False, torch.float32),
    "out_bf16": (torch.float32, True, True, False, torch.bfloat16),
}

LAYOUTS = {
    "contiguous": lambda x: x,
    "row_slice": lambda x: torch.cat([x, x[..., :5]], -1)[..., : x.shape[-1]],
    "transposed": lambda x: x.transpose(0, 1).contiguous().transpose(0, 1),
    "column_step": lambda x: torch.stack([x, x], -1)[..., 0],
}


def make_args(device, dtype, config, shape, seed, layout="contiguous", grad=True):
    wdt, has_bias, has_res, zc, odt = CONFIGS[config]
    gen = torch.Generator().manual_seed(seed)
    hidden = shape[-1]

    def randn(shape, dt, scale=1.0, shift=0.0):
        return (torch.randn(shape, generator=gen) * scale + shift).to(device, dt)

    x = LAYOUTS[layout](randn(shape, dtype))
    weight = None
    if wdt is not None:
        weight = randn((hidden,), dtype if wdt == "x" else wdt, 0.3, 0.0 if zc else 1.0)
    pdt = weight.dtype if weight is not None else dtype
    bias = randn((hidden,), pdt, 0.5) if has_bias else None
    residual = LAYOUTS[layout](randn(shape, dtype)) if has_res else None
    out_dtype = None if odt == "x" else odt
    tensors = [t.requires_grad_(grad) if t is not None else None for t in (x, weight, bias, residual)]
    ydt = out_dtype or dtype
    grads_out = [randn(shape, ydt), randn(shape, dtype) if has_res else None]
    # A large eps, so that a wrong eps would change the bits.
    return tensors, dict(eps=0.1, zero_centered=zc, out_dtype=out_dtype), grads_out


def run(tensors, kwargs, grads_out):
    """Outputs and the gradients of every input that requires grad."""
    x, weight, bias, residual = tensors
    out = nt.rms_norm(x, weight, kwargs["eps"], bias=bias, residual=residual,
                      zero_centered=kwargs["zero_centered"], out_dtype=kwargs["out_dtype"])
    outs = list(out) if residual is not None else [out]
    inputs = [t for t in tensors if t is not None and t.requires_grad]
    grads = []
    if inputs:
        grads = torch.autograd.grad(outs, inputs, grads_out[: len(outs)])
    return outs, list(grads)


def both_paths(monkeypatch, calls, make):
    """Runs make()'s case through the eager path and through the custom op; checks each path
    really ran, and returns both results."""
    results = {}
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        calls.clear()
        results[fast] = run(*make())
        path, other = ("fast", "op") if fast else ("op", "fast")
        assert calls[f"{path}_fwd"] == 1 and calls[f"{other}_fwd"] == 0, dict(calls)
        needs_bwd = bool(results[fast][1])
        assert calls[f"{path}_bwd"] == int(needs_bwd) and calls[f"{other}_bwd"] == 0, dict(calls)
        assert calls["c_fwd"] == 1 and calls["c_bwd"] == int(needs_bwd), dict(calls)
    return results[True], results[False]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_bitwise_equal_to_custom_op(torch_device, monkeypatch, calls, dtype, config):
    (fo, fg), (oo, og) = both_paths(
        monkeypatch, calls, lambda: make_args(torch_device, dtype, config, (2, 3, 71), seed=1)
    )
    for name, a, b in zip(("y", "residual_out"), fo, oo):
        assert_bitwise_equal(a, b, name)
    assert len(fg) == len(og)
    for i, (a, b) in enumerate(zip(fg, og)):
        assert_bitwise_equal(a, b, f"gradient {i}")


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 29), (3, 17389), (2, 65537), (7, 64)])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_bitwise_equal_shapes_and_layouts(torch_device, monkeypatch, calls, shape, layout):
    if layout == "transposed" and len(shape) < 2:
        pytest.skip("needs two dims")
    (fo, fg), (oo, og) = both_paths(
        monkeypatch,
        calls,
        lambda: make_args(torch_device, torch.bfloat16, "gemma_residual_bias", shape, sum(shape), layout),
    )
    for a, b in zip(fo + fg, oo + og):
        assert_bitwise_equal(a, b, f"{layout} {shape}")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_ops_raw_pointer_calls_match_dlpack(torch_device, monkeypatch, calls, config, layout):
    """The custom ops' implementations take the raw-pointer call (not DLPack) for plain
    arguments, with the bits of their DLPack call: outputs, rstd and gradients."""
    monkeypatch.setattr(_eager, "enabled", False)  # every call through the ops
    results = {}
    for raw in (True, False):
        monkeypatch.setattr(_ops, "raw_pointer_calls", raw)
        calls.clear()
        tensors, kwargs, grads_out = make_args(torch_device, torch.float16, config, (3, 2, 45), 7, layout)
        outs, grads = run(tensors, kwargs, grads_out)
        x, weight, bias, residual = tensors
        rstd = torch.ops.normkit.rms_norm_fwd(x, weight, bias, residual, kwargs["eps"],
                                              kwargs["zero_centered"], kwargs["out_dtype"])[2]
        assert calls["op_fwd"] == 2 and calls["op_bwd"] == 1 and calls["fast_fwd"] == 0, dict(calls)
        assert calls["c_fwd"] == 2 and calls["c_bwd"] == 1, dict(calls)
        dlpack = 0 if raw else 1
        assert calls["dlpack_fwd"] == 2 * dlpack and calls["dlpack_bwd"] == dlpack, dict(calls)
        results[raw] = outs + [rstd] + grads
    assert len(results[True]) == len(results[False])
    for i, (a, b) in enumerate(zip(results[True], results[False])):
        assert_bitwise_equal(a, b, f"raw-pointer vs DLPack output {i}")


def test_ops_take_dlpack_for_what_raw_calls_do_not_describe(calls):
    """dy in another shape with the same rows: the raw call needs s's shape, DLPack takes it."""
    s = torch.randn(2, 3, 8)
    rstd = torch.rand(2, 3) + 0.5
    dy = torch.randn(6, 8)
    w = torch.randn(8)
    got = torch.ops.normkit.rms_norm_bwd(dy, s, rstd, w, None, False, True, False, torch.float32)
    want = torch.ops.normkit.rms_norm_bwd(dy.view(2, 3, 8), s, rstd, w, None, False, True, False,
                                          torch.float32)
    assert calls["op_bwd"] == 2 and calls["c_bwd"] == 2 and calls["dlpack_bwd"] == 1, dict(calls)
    for a, b in zip(got, want):
        assert_bitwise_equal(a, b, "dy reshaped")


def test_only_some_inputs_need_grad(monkeypatch, calls):
    """needs_input_grad decides which gradients are computed, as in the custom op."""
    for need in ("x", "weight", "residual", "bias"):

        def make(need=need):
            args = make_args("cpu", torch.float32, "gemma_residual_bias", (4, 33), 3, grad=False)
            args[0][("x", "weight", "bias", "residual").index(need)].requires_grad_(True)
            return args

        (fo, fg), (oo, og) = both_paths(monkeypatch, calls, make)
        assert len(fg) == len(og) == 1
        assert_bitwise_equal(fg[0], og[0], f"gradient of {need}")


def test_gradient_layouts_match_custom_op(monkeypatch, calls):
    """dweight and dbias are allocated like weight on the fast path: contiguous, with the op's
    dtypes, strides and bits, also for a one-column weight whose stride is not 1."""
    for hidden, config in ((1, "bias"), (24, "bias"), (24, "bias_only"), (24, "fp32_weight")):

        def make(hidden=hidden, config=config):
            tensors, kwargs, grads_out = make_args("cpu", torch.bfloat16, config, (5, hidden), 11)
            weight = tensors[1]
            if weight is not None and hidden == 1:  # a [1] view with stride 3
                tensors[1] = torch.stack([weight.detach()] * 3, -1)[..., 0].requires_grad_(True)
                assert tensors[1].stride() == (3,) and tensors[1].is_contiguous()
            return tensors, kwargs, grads_out

        (_, fg), (_, og) = both_paths(monkeypatch, calls, make)
        assert len(fg) == len(og)
        for i, (a, b) in enumerate(zip(fg, og)):
            assert a.stride() == b.stride() and a.is_contiguous(), (config, hidden, i)
            assert_bitwise_equal(a, b, f"{config} hidden {hidden} gradient {i}")


@pytest.mark.parametrize("context", ["no_grad", "inference_mode"])
def test_no_autograd_graph_outside_grad_mode(calls, context):
    x = torch.randn(3, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    with getattr(torch, context)():
        y = nt.rms_norm(x, w, 1e-6)
    assert not y.requires_grad and y.grad_fn is None
    assert calls["fast_fwd"] == 1 and calls["op_fwd"] == 0
    with torch.no_grad():
        torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, (16,), w, 1e-6))


def test_compile_uses_custom_op(torch_device, calls):
    """Under torch.compile (fullgraph) only the custom ops run, in forward and backward."""
    x = torch.randn(2, 5, 64, device=torch_device, requires_grad=True)
    w = torch.randn(64, device=torch_device, requires_grad=True)
    r = torch.randn(2, 5, 64, device=torch_device, requires_grad=True)

    def f(x, w, r):
        y, ro = nt.rms_norm(x, w, 1e-6, residual=r)
        return y.sum() + ro.square().sum()

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    grads_c = torch.autograd.grad(compiled(x, w, r), (x, w, r))
    assert calls["fast_fwd"] == 0 and calls["fast_bwd"] == 0, dict(calls)
    assert calls["op_fwd"] >= 1 and calls["op_bwd"] >= 1, dict(calls)
    calls.clear()
    grads_e = torch.autograd.grad(f(x, w, r), (x, w, r))
    assert calls["fast_fwd"] == 1 and calls["fast_bwd"] == 1 and calls["op_fwd"] == 0, dict(calls)
    for gc, ge in zip(grads_c, grads_e):
        assert_bitwise_equal(gc, ge, "compiled vs eager gradient")


@pytest.mark.parametrize("strict", [False, True])
def test_export_records_the_op(calls, strict):
    """torch.export (strict: dynamo; non-strict: fake tensors and modes) sees the custom op."""
    program = torch.export.export(nt.RMSNorm(32), (torch.randn(4, 32),), strict=strict)
    assert "normkit.rms_norm_fwd" in str(program.graph)
    assert calls["fast_fwd"] == 0


def test_compiled_autograd_after_eager_forward(monkeypatch, calls):
    """A fast-path forward whose backward compiled autograd traces: the graph gets the custom
    backward op, and the gradients are those of the all-custom-op run, bit for bit."""
    compiled_autograd = getattr(torch._dynamo, "compiled_autograd", None)
    if compiled_autograd is None or not hasattr(compiled_autograd, "_enable"):
        pytest.skip("this torch has no compiled_autograd._enable")
    grads = {}
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        torch._dynamo.reset()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(4, 32, generator=gen).requires_grad_(True)
        w = torch.randn(32, generator=gen).requires_grad_(True)
        calls.clear()
        with compiled_autograd._enable(torch.compile(backend="aot_eager")):
            nt.rms_norm(x, w, 1e-6).square().sum().backward()
        assert calls["fast_fwd"] == int(fast) and calls["fast_bwd"] == 0 and calls["op_bwd"] == 1
        grads[fast] = (x.grad, w.grad)
    for a, b in zip(grads[True], grads[False]):
        assert_bitwise_equal(a, b, "gradient under compiled autograd")


def test_dispatch_mode_sees_the_op(calls):
    x = torch.randn(3, 8, requires_grad=True)
    with DispatchLog() as log:
        y = nt.rms_norm(x, torch.ones(8), 1e-6)
        y.sum().backward()
    assert "normkit.rms_norm_fwd.default" in log.ops and "normkit.rms_norm_bwd.default" in log.ops
    assert calls["fast_fwd"] == 0 and calls["fast_bwd"] == 0


def test_function_mode_sees_the_op(calls):
    with FunctionLog() as log:
        nt.rms_norm(torch.randn(3, 8), torch.ones(8), 1e-6)
    assert any("normkit.rms_norm_fwd" in f for f in log.funcs)
    assert calls["fast_fwd"] == 0 and calls["op_fwd"] == 1


def test_fake_and_meta_tensors(calls):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y, ro = nt.rms_norm(torch.empty(2, 3, 64), torch.empty(64), residual=torch.empty(2, 3, 64))
    assert y.shape == ro.shape == (2, 3, 64)
    y = nt.rms_norm(torch.empty(4, 64, device="meta", dtype=torch.bfloat16), None, 1e-6,
                    out_dtype=torch.float32)
    assert y.device.type == "meta" and y.shape == (4, 64) and y.dtype == torch.float32
    assert calls["fast_fwd"] == 0 and calls["op_fwd"] == 0  # fake kernels only


def test_jit_trace_records_the_op(calls):
    w = torch.randn(8)
    traced = torch.jit.trace(lambda x: nt.rms_norm(x, w, 1e-6), torch.randn(2, 8), check_trace=False)
    assert "normkit::rms_norm_fwd" in str(traced.graph)
    assert calls["fast_fwd"] == 0
    x = torch.randn(5, 8)
    assert_bitwise_equal(traced(x), nt.rms_norm(x, w, 1e-6), "traced vs eager")


def test_vmap_takes_the_op(calls):
    w = torch.randn(8)
    xs = torch.randn(3, 2, 8)
    out = torch.vmap(lambda x: nt.rms_norm(x, w, 1e-6))(xs)
    assert calls["fast_fwd"] == 0
    assert_bitwise_equal(out, nt.rms_norm(xs, w, 1e-6), "vmap vs batched call")


def test_tensor_subclass_takes_the_op(calls):
    class Tagged(torch.Tensor):
        pass

    x = torch.randn(3, 8)
    y = nt.rms_norm(x.as_subclass(Tagged), torch.ones(8), 1e-6)
    assert calls["fast_fwd"] == 0 and calls["op_fwd"] == 1
    assert_bitwise_equal(y.as_subclass(torch.Tensor), nt.rms_norm(x, torch.ones(8), 1e-6), "subclass")


def test_unusual_arguments_take_the_op(calls):
    """Anything the fast path does not describe itself goes to the custom op (same results)."""
    x = torch.randn(4, 8)
    cases = [
        (torch.randn(0, 8), None),  # no rows
        (x, torch.ones(16)[::2]),  # non-contiguous weight: the op copies it
    ]
    for xi, w in cases:
        nt.rms_norm(xi, w, 1e-6)
    assert calls["fast_fwd"] == 0 and calls["op_fwd"] == 2, dict(calls)
    assert calls["c_fwd"] == 1, dict(calls)  # the empty case never reaches _C


def test_errors_match_custom_op(monkeypatch):
    """A C API failure raises the same NormkitError on both paths."""
    messages = []
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        with pytest.raises(_C.NormkitError) as info:
            nt.rms_norm(torch.randn(2, 8), torch.ones(8), -1.0)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "eps" in messages[0]


def test_double_backward_fails_like_custom_op(monkeypatch):
    messages = []
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        x = torch.randn(3, 8, requires_grad=True)
        w = torch.randn(8, requires_grad=True)
        (gx,) = torch.autograd.grad(nt.rms_norm(x, w, 1e-6).square().sum(), x, create_graph=True)
        with pytest.raises(RuntimeError) as info:
            torch.autograd.grad(gx.sum(), w)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "normkit.rms_norm_bwd" in messages[0]


def test_saved_tensors_follow_autograd_rules(calls):
    """Saved tensors go through saved_tensors_hooks and the version counter check."""
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    x = torch.randn(3, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = nt.rms_norm(x * 1, w, 1e-6)
    assert (3, 8) in packed and (3,) in packed and (8,) in packed
    y.sum().backward()
    assert calls["fast_bwd"] == 1

    xi = torch.randn(3, 8, requires_grad=True)
    leaf_view = xi * 1
    y = nt.rms_norm(leaf_view, w, 1e-6)
    with torch.no_grad():
        leaf_view.add_(1.0)  # modifies a tensor the backward needs
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_autocast_changes_nothing(monkeypatch, calls):
    """Custom ops fall through autocast (dtypes stay as given); the eager path does the same."""

    with torch.autocast("cpu", dtype=torch.bfloat16):
        (fo, fg), (oo, og) = both_paths(
            monkeypatch, calls, lambda: make_args("cpu", torch.float32, "residual", (3, 40), 5)
        )
    assert fo[0].dtype == torch.float32
    for a, b in zip(fo + fg, oo + og):
        assert_bitwise_equal(a, b, "under autocast")


def test_workspace_sizes_cached_per_shape(calls):
    """dweight is right for several row counts in a row (the workspace size is looked up per shape)."""
    w = torch.randn(32, dtype=torch.float64).float().requires_grad_(True)
    for rows in (1, 7, 300, 7):
        x = torch.randn(rows, 32)
        (gw,) = torch.autograd.grad(nt.rms_norm(x, w, 1e-6).sum(), [w])
        x64 = x.double()
        want = (x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + 1e-6)).sum(0)
        torch.testing.assert_close(gw.double(), want, rtol=1e-5, atol=1e-5)
    assert calls["fast_bwd"] == 4 and calls["op_bwd"] == 0


def test_cuda_uses_current_stream_fast_path(torch_cuda, calls):
    s = torch.cuda.Stream()
    x = torch.randn(256, 1024, device="cuda", requires_grad=True)
    w = torch.randn(1024, device="cuda", requires_grad=True)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = nt.rms_norm(x, w, 1e-6)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
        want = torch.nn.functional.rms_norm(x, (1024,), w, 1e-6)
        torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    torch.cuda.current_stream().wait_stream(s)
    assert calls["fast_fwd"] == 1 and calls["fast_bwd"] == 1 and calls["op_fwd"] == 0
