"""normkit.torch on DTensors over two CPU ranks (gloo): rows sharded over the batch or the
sequence dimension keep their sharding, the hidden dimension is replicated first, dweight and
dbias come out as partial sums and a per-tensor amax as a partial max; each output the same
bits as the plain call (sums over rows within float tolerance).

The ranks run in child processes (dtensor_cases.py spawns them); GPU runs of this file use
the CPU too (the GPU machine has one GPU).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from child_cases import assert_ok, run_child

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this torch has no distributed gloo backend", allow_module_level=True)

CASES_SCRIPT = Path(__file__).with_name("dtensor_cases.py")
CASES = [
    "rows_sharded",
    "sequence_sharded",
    "hidden_sharded",
    "replicated",
    "module_without_weight_grad",
    "quant_token_rows",
    "quant_tensor_amax",
    "quant_transposed",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("dtensor") / "results.json"
    return run_child(CASES_SCRIPT, out, str(free_port()), env={"OMP_NUM_THREADS": "1"})


def test_every_case_ran(results):
    assert sorted(results) == sorted(CASES)


@pytest.mark.parametrize("case", CASES)
def test_dtensor(results, case):
    assert_ok(results, case)
