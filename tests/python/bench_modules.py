"""The benchmark scripts under bench/ loaded as modules, for tests of their pure parts."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def compare_module():
    """bench/compare.py (skips the test where torch, which it imports at its top, is missing)."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("nk_bench_compare", ROOT / "bench" / "compare.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)
