"""Shared fixtures: devices to run on, and seeded random inputs.

GPU cases are parameterized like the CPU ones and skip, with the reason, where CUDA is not
usable. Set NK_REQUIRE_CUDA=1 to turn those skips into failures (on a GPU machine, so that a
CPU-only build cannot pass by skipping).
"""

from __future__ import annotations

import os

import pytest

REQUIRE_CUDA = os.environ.get("NK_REQUIRE_CUDA") == "1"


def _cuda_unusable_reason(framework_has_gpu: bool, framework: str) -> str | None:
    import normkit

    if not framework_has_gpu:
        return f"{framework} sees no CUDA device"
    if not normkit.has_cuda_build():
        return "normkit was built without CUDA"
    if normkit.cuda_device_count() == 0:
        return "normkit sees no CUDA device"
    return None


def skip_or_fail(reason: str) -> None:
    if REQUIRE_CUDA:
        pytest.fail(f"NK_REQUIRE_CUDA=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(params=["cpu", "cuda"])
def torch_device(request):
    """'cpu', or 'cuda' where torch and normkit can both use a GPU."""
    torch = pytest.importorskip("torch")
    if request.param == "cuda":
        reason = _cuda_unusable_reason(torch.cuda.is_available(), "torch")
        if reason:
            skip_or_fail(reason)
    return request.param


@pytest.fixture
def torch_cuda():
    """'cuda', for tests of what only CUDA has (streams, graphs); skips (or fails under
    NK_REQUIRE_CUDA=1) with the reason where torch and normkit cannot both use a GPU."""
    torch = pytest.importorskip("torch")
    reason = _cuda_unusable_reason(torch.cuda.is_available(), "torch")
    if reason:
        skip_or_fail(reason)
    return "cuda"


@pytest.fixture(params=["cpu", "gpu"])
def jax_device(request):
    """A jax.Device: the CPU, or a GPU where jax and normkit can both use one."""
    jax = pytest.importorskip("jax")
    if request.param == "gpu":
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        reason = _cuda_unusable_reason(bool(gpus), "jax")
        if reason:
            skip_or_fail(reason)
        return gpus[0]
    return jax.devices("cpu")[0]
