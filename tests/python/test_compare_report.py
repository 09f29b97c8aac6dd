"""bench/compare.py's reading of its own timings: which figures it calls unsteady (the rule of
`normkit bench`, tools/timing.h) and how its tables mark them."""
from bench_modules import compare_module


def test_sample_stats_median_min_p90():
    compare = compare_module()
    s = compare.sample_stats([5, 1, 4, 2, 3, 10, 9, 8, 7, 6])
    assert (s["median_us"], s["min_us"], s["p90_us"]) == (5.5, 1, 9)


def test_unsteady_as_normkit_bench_says():
    compare = compare_module()

    def steady(fast, slow, slow_count):
        return compare.sample_stats([slow] * slow_count + [fast] * (100 - slow_count))["steady"]

    assert not steady(49.6, 64.4, 60)  # a stretch of calls ~15 µs slow (2026-11-27)
    assert steady(91.5, 93.2, 60)  # a large steady shape: 2% over its fastest call
    assert steady(5.4, 6.6, 60)  # a launch-bound one: 22% over, but by 1.2 µs
    assert steady(49.6, 64.4, 10)  # a few slow calls leave the median alone


def test_tables_mark_unsteady_figures():
    compare = compare_module()
    entry = {"median_us": 583.3, "min_us": 30.1, "p90_us": 700.0, "steady": False}
    assert compare.fmt_us(entry) == "583.3 (unsteady: min 30.1)"
    assert compare.fmt_us({**entry, "steady": True}) == "583.3"
    assert compare.fmt_us({"median_us": 10.0}) == "10.0"  # do_bench's median alone: unmarked
