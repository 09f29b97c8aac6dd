"""The named shape sets of `normkit bench --shapes` (tools/shapes.cpp) and of bench/compare.py
list the same shapes in the same order, and compare.py expands a name among explicit shapes."""
import re

import pytest

from bench_modules import ROOT as _ROOT
from bench_modules import compare_module as _compare_module


def _tool_shape_sets():
    """{name: [(rows, hidden), ...]} from kShapeSets in tools/shapes.cpp (C string pieces joined)."""
    source = (_ROOT / "tools" / "shapes.cpp").read_text()
    body = source[source.index("kShapeSets[2] = {"):]
    body = body[: body.index("};")]
    sets = {}
    for entry in re.finditer(r'\{"(\w+)",\s*((?:\s*//[^\n]*\n|\s*"[^"]*")+)\s*,\s*"[^"]*"\}', body):
        text = "".join(re.findall(r'"([^"]*)"', re.sub(r"//[^\n]*", "", entry.group(2))))
        sets[entry.group(1)] = [tuple(int(v) for v in item.split("x")) for item in text.split(",")]
    return sets


def test_tool_and_compare_list_the_same_sets():
    tool = _tool_shape_sets()
    compare = _compare_module()
    assert set(tool) == {"sweep", "models"}
    assert tool["sweep"] == compare.PEER_SHAPES
    assert tool["models"] == compare.MODEL_SHAPES
    assert set(compare.SHAPE_SETS) == set(tool)


def test_compare_expands_a_set_among_shapes():
    compare = _compare_module()
    shapes = compare.parse_shapes("29x71, models ,1x4096")
    assert shapes == [(29, 71), *compare.MODEL_SHAPES, (1, 4096)]
    with pytest.raises(Exception, match="shape set"):
        compare.parse_shapes("modls")
