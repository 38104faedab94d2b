"""benchmarks/bench_mutation.py's random sample (issue 24 item 10): stratified by package, the
stated size, the same draw from the same seed."""

from __future__ import annotations

from collections import Counter
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.scripts import import_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_script("benchmarks", "bench_mutation")


def _names(counts: dict[str, int]) -> list[str]:
    module = {"cli": "simcluster.cli_sweep", "perf": "simcluster.perf.flops"}
    return [f"{module.get(p, f'simcluster.{p}.mod')}.x_f__mutmut_{i}"
            for p, n in counts.items() for i in range(n)]


def test_package_of(bench: ModuleType) -> None:
    assert bench.package_of("simcluster.perf.flops.x_f__mutmut_3") == "perf"
    assert bench.package_of("simcluster.cli_sweep.x_handle__mutmut_1") == "cli"
    assert bench.package_of("simcluster.cli.x_main__mutmut_1") == "cli"
    assert bench.package_of("simcluster.units.x_parse__mutmut_2") == "units"


def test_sample_by_hand(bench: ModuleType) -> None:
    """1,000 perf, 500 sim, 10 flows, 30 units: units is not sampled; flows gives all 10 (under
    the floor of 20); perf and sim start at 20 and the other 50 go one at a time to the larger
    shortfall against 100 x n / 1,510 (66.2 and 33.1), which ends where the two are equal:
    66.2 - p = 33.1 - (90 - p), p = 61.55 -> perf 62, sim 28."""
    names = _names({"perf": 1000, "sim": 500, "flows": 10, "units": 30})
    sample = bench.draw_sample(names, 100, 7)
    counts = Counter(bench.package_of(n) for n in sample)
    assert counts == {"perf": 62, "sim": 28, "flows": 10}
    assert sample == sorted(set(sample))
    assert bench.draw_sample(list(reversed(names)), 100, 7) == sample  # order does not matter
    assert bench.draw_sample(names, 100, 8) != sample


@given(perf=st.integers(0, 400), sim=st.integers(0, 400), size=st.integers(40, 300),
       seed=st.integers(0, 2**32 - 1))
def test_sample_size_floor_and_membership(bench: ModuleType, perf: int, sim: int, size: int,
                                          seed: int) -> None:
    names = _names({"perf": perf, "sim": sim})
    sample = bench.draw_sample(names, size, seed)
    assert set(sample) <= set(names)
    assert len(sample) == max(min(size, len(names)),
                              min(perf, bench.MIN_PER_PACKAGE) + min(sim, bench.MIN_PER_PACKAGE))
    counts = Counter(bench.package_of(n) for n in sample)
    for package, total in (("perf", perf), ("sim", sim)):
        assert counts[package] >= min(total, bench.MIN_PER_PACKAGE)
