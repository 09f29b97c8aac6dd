"""normkit.torch under torch.compile(fullgraph=True) (no graph break) and CUDA graph capture."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normkit.torch")


def block(x, weight, residual):
    """A transformer-block-shaped use: fused residual add, norm, and a projection."""
    y, residual_out = nt.rms_norm(x, weight, 1e-6, residual=residual)
    return (y.float() * 2.0).sum() + residual_out.float().square().mean()


def inputs(device, dtype=torch.bfloat16, rows=6):
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(2, rows, 64, generator=gen).to(device, dtype).requires_grad_(True)
    w = (1 + 0.2 * torch.randn(64, generator=gen)).to(device, dtype).requires_grad_(True)
    r = torch.randn(2, rows, 64, generator=gen).to(device, dtype).requires_grad_(True)
    return x, w, r


def eager_and_compiled(fn, args, **compile_kw):
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, **compile_kw)
    results = []
    for f in (fn, compiled):
        out = f(*args)
        grads = torch.autograd.grad(out, args)
        results.append((out, grads))
    return results


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_fullgraph_forward_backward(torch_device, backend):
    """Same kernels, so eager and compiled agree up to the float reductions around them."""
    if backend == "inductor" and torch_device == "cpu" and os.environ.get("NK_SLOW_TESTS") != "1":
        # Inductor's CPU code generation compiles C++ (about a minute on a 2-core machine);
        # aot_eager covers dynamo, the fake kernels and AOTAutograd. NK_SLOW_TESTS=1 runs it.
        pytest.skip("inductor on CPU compiles C++ for ~1 min; set NK_SLOW_TESTS=1 to run it")
    args = inputs(torch_device)
    (out_e, grads_e), (out_c, grads_c) = eager_and_compiled(block, args, backend=backend)
    torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-5)
    for ge, gc in zip(grads_e, grads_c):
        assert gc.dtype == ge.dtype
        torch.testing.assert_close(gc, ge, rtol=0, atol=0)


def test_dynamic_shapes_one_graph(torch_device):
    """Fake kernels work with symbolic sizes: new row counts reuse the compiled graph."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(block, fullgraph=True, dynamic=True, backend=counter)
    for rows in (3, 5, 9):
        args = inputs(torch_device, rows=rows)
        torch.autograd.grad(compiled(*args), args)
        expected = block(*args)
        torch.testing.assert_close(compiled(*args), expected)
    assert counter.frame_count == 1


def test_module_compiles_fullgraph(torch_device):
    m = nt.RMSNorm(64, device=torch_device)
    x = torch.randn(4, 64, device=torch_device)
    torch._dynamo.reset()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)


def test_cuda_graph_capture_forward_backward(torch_cuda):
    x, w, r = inputs("cuda")
    static = [t.detach().clone().requires_grad_(True) for t in (x, w, r)]
    # Warm up on a side stream, as torch recommends before capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            torch.autograd.grad(block(*static), static)
    torch.cuda.current_stream().wait_stream(s)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(*static)
        grads = torch.autograd.grad(out, static)
    # Replay on new data and compare with eager.
    fresh = inputs("cuda", rows=6)
    gen = torch.Generator().manual_seed(99)
    for t, f in zip(static, fresh):
        with torch.no_grad():
            t.copy_(torch.randn(f.shape, generator=gen).to(t.device, t.dtype))
    graph.replay()
    eager_args = [t.detach().clone().requires_grad_(True) for t in static]
    eager_out = block(*eager_args)
    eager_grads = torch.autograd.grad(eager_out, eager_args)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-5)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_reduce_overhead_mode(torch_cuda):
    """torch.compile's CUDA-graph mode around the op."""
    torch._dynamo.reset()
    m = nt.RMSNorm(64, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(m, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(compiled(x), m(x), rtol=0, atol=0)


def test_uses_current_stream(torch_cuda):
    """Work is queued on the caller's stream: results are right when read on that stream."""
    s = torch.cuda.Stream()
    x = torch.randn(512, 1024, device="cuda")
    w = torch.randn(1024, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = nt.rms_norm(x, w, 1e-6)
        want = torch.nn.functional.rms_norm(x, (1024,), w, 1e-6)
        torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
