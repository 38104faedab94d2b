"""units.py: suffix conversion is exact and explicit about decimal vs binary prefixes."""

from __future__ import annotations

import pytest

from simcluster import units


@pytest.mark.parametrize(
    ("value", "suffix", "si"),
    [(300, "GBps", 300e9), (400, "Gbps", 50e9), (3, "us", 3e-6), (80, "GiB", 80 * 2**30),
     (312, "TFLOPS", 312e12), (60, "min", 3600.0), (2, "days", 172800.0)],
)
def test_to_si(value: float, suffix: str, si: float) -> None:
    assert units.to_si(value, suffix) == pytest.approx(si, rel=1e-15)


def test_tflops_is_decimal_not_binary() -> None:
    # decimal prefixes: never 2**40 for TFLOP/s.
    assert units.to_si(1, "TFLOPS") == 1e12


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("1K", 1024), ("8G", 8 * 2**30), ("512MiB", 512 * 2**20), ("1MB", 1e6), ("1e6", 1e6), ("64", 64)],
)
def test_parse_size(text: str, nbytes: float) -> None:
    assert units.parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "1X", "G", "-1K", "1 KB B"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        units.parse_size(text)


def test_split_suffix() -> None:
    assert units.split_suffix("bandwidth_GBps") == ("bandwidth", "GBps")
    assert units.split_suffix("weibull_shape") is None
    assert units.split_suffix("heads") is None


def test_same_dimension_lists_time_units() -> None:
    assert {"us", "ms", "s", "min", "h", "days"} <= set(units.same_dimension("us"))


def test_format_bytes() -> None:
    assert units.format_bytes(2**30) == "1 GiB"
    assert units.format_bytes(100) == "100 B"
