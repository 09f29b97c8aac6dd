"""Test cases that need a process of their own (JAX with four CPU devices, two torch ranks):
the child runs them with run_all and writes each case's outcome to a JSON file; the test file
starts it with run_child and asserts each case with assert_ok."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest


def run_all(cases: dict) -> dict:
    """name -> "ok", or the traceback of what failed: one failure does not hide the others."""
    results = {}
    for name, fn in cases.items():
        try:
            fn()
            results[name] = "ok"
        except Exception:  # noqa: BLE001
            results[name] = traceback.format_exc(limit=6)
    return results


def run_child(script: Path, out: Path, *args: str, env: dict | None = None) -> dict:
    """Runs `python script out *args` with tests/python importable; its results, or a test
    failure with its output when it wrote none."""
    path = os.pathsep.join(filter(None, (str(script.parent), os.environ.get("PYTHONPATH"))))
    run = subprocess.run([sys.executable, str(script), str(out), *args], check=False,
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=path, **(env or {})))  # fmt: skip
    if run.returncode != 0 or not out.exists():
        pytest.fail(f"{script.name} exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return json.loads(out.read_text())


def assert_ok(results: dict, case: str) -> None:
    outcome = results.get(case, "did not run")
    assert outcome == "ok", f"{case}:\n{outcome}"
