"""normkit imported before the framework it binds: each order in a fresh interpreter.

On the GPU machine (a g++ that links libstdc++ statically) `import normkit; import torch` and
`import normkit.jax` once died with SIGSEGV inside the framework's import: the extension
exported its own copy of libstdc++. Tests elsewhere import the framework first, so only a fresh
process with normkit first shows it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

# framework -> a statement that runs one normkit call through it after the import
PROGRAMS = {
    "torch": (
        "import normkit.torch as nk, torch\n"
        "x = torch.randn(4, 64)\n"
        "assert torch.isfinite(nk.rms_norm(x, torch.ones(64))).all()\n"
    ),
    "jax": (
        "import normkit.jax as nkj, jax.numpy as jnp\n"
        "x = jnp.arange(256, dtype=jnp.float32).reshape(4, 64) + 1\n"
        "assert bool(jnp.isfinite(nkj.rms_norm(x, jnp.ones(64))).all())\n"
    ),
}


@pytest.mark.parametrize("framework", sorted(PROGRAMS))
@pytest.mark.parametrize("first", ["normkit", "normkit.<framework>"])
def test_normkit_imported_first(framework, first):
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    module = first.replace("<framework>", framework)
    program = f"import {module}\nimport {framework}\n" + PROGRAMS[framework]
    run = subprocess.run([sys.executable, "-X", "faulthandler", "-c", program], check=False,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
