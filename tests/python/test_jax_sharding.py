"""normkit.jax.rms_norm and rms_norm_quant on operands sharded over a mesh of four CPU devices:
rows stay split (no gather), dweight and dbias are summed across the row shards, a sharded
hidden axis is gathered, shard_map and vmap still work; every value against the float64
reference (rms_norm) or the same call on one device, bit for bit (rms_norm_quant).

The cases run in a child process (jax_sharding_cases.py): XLA's CPU device count is fixed when
jax starts, and this process's jax has started with one. The same Python code partitions the
CUDA targets; GPU runs of this file still use the CPU devices (the GPU machine has one GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    "quant_token_rows",
    "quant_tensor_amax_transposed",
    "quant_transposed_two_row_axes",
    "quant_mxfp8_two_axes",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("sharding") / "results.json"
    path = os.pathsep.join(filter(None, (str(CASES_SCRIPT.parent), os.environ.get("PYTHONPATH"))))
    run = subprocess.run([sys.executable, str(CASES_SCRIPT), str(out)], check=False, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=path), timeout=600)  # fmt: skip
    if run.returncode != 0 or not out.exists():
        pytest.fail(f"{CASES_SCRIPT.name} exited {run.returncode}:\n"
                    f"{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return json.loads(out.read_text())


def test_every_case_ran(results):
    assert sorted(results) == sorted(CASES)


@pytest.mark.parametrize("case", CASES)
def test_sharded(results, case):
    outcome = results.get(case, "did not run")
    assert outcome == "ok", f"{case}:\n{outcome}"
