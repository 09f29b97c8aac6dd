"""normkit.jax.rms_norm and rms_norm_quant on operands sharded over a mesh of four CPU devices:
rows stay split (no gather), dweight and dbias are summed across the row shards, a sharded
hidden axis is gathered, shard_map and vmap still work; every value against the float64
reference (rms_norm) or the same call on one device, bit for bit (rms_norm_quant). Under both
partitioners: Shardy (JAX's default) and GSPMD (jax_use_shardy_partitioner=False).

The cases run in a child process (jax_sharding_cases.py): XLA's CPU device count is fixed when
jax starts, and this process's jax has started with one. The same Python code partitions the
CUDA targets; GPU runs of this file still use the CPU devices (the GPU machine has one GPU).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from child_cases import assert_ok, run_child

pytest.importorskip("jax")
import normkit.jax  # noqa: F401  (fails, not skips, when normkit was built without jax)

CASES_SCRIPT = Path(__file__).with_name("jax_sharding_cases.py")
CASES = [
    "rows_over_one_axis",
    "rows_over_two_axes",
    "hidden_sharded",
    "rows_and_hidden_sharded",
    "no_weight_no_residual",
    "inside_shard_map",
    "same_bits_twice",
    "vmap_under_mesh",
    "flax_module",
    "quant_token_rows",
    "quant_tensor_amax_transposed",
    "quant_transposed_two_row_axes",
    "quant_mxfp8_two_axes",
]


@pytest.fixture(scope="module", params=["shardy", "gspmd"])
def results(request, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp(f"sharding-{request.param}") / "results.json"
    return run_child(CASES_SCRIPT, out, request.param)


def test_every_case_ran(results):
    assert sorted(results) == sorted(CASES)


NEEDS_FLAX = pytest.mark.skipif(importlib.util.find_spec("flax") is None, reason="flax is not installed")


@pytest.mark.parametrize("case", [pytest.param(c, marks=NEEDS_FLAX) if c.startswith("flax") else c
                                  for c in CASES])  # fmt: skip
def test_sharded(results, case):
    assert_ok(results, case)
