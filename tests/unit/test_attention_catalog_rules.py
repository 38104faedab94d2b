"""How ``perf/kernels/attention.py`` completes the published tables of ``catalog/attention.yaml``.

The module docstring of :mod:`simcluster.perf.kernels.attention` lists four completion rules:

1. forward and forward+backward given: ``bwd = 2.5 / (3.5 / fwd_bwd - 1 / fwd)``;
2. only forward+backward given: split with the donor's backward/forward ratio ``r``:
   ``fwd = c (1 + 2.5 / r) / 3.5``, ``bwd = fwd * r``;
3. a missing backward: the other mask's backward times the donor's ratio between masks, or with
   no backward at all for the head dimension, the forward times the donor's backward/forward ratio;
4. ``alias``: another kernel's table on the same architecture.

Nulls in a published series are filled by :func:`attention._filled` (log-length interpolation
between known neighbours, the end value at the ends). Every oracle below is computed by hand from
the raw numbers of the catalog entry it names (quoted as literals, and also re-read from the raw
YAML through ``catalog.load_packaged``, which reads the packaged copy inside the repository).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import pytest

from simcluster import catalog
from simcluster.perf.kernels import attention

LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
FULL, CAUSAL = False, True


def _raw(kernel: str, arch: str) -> dict[str, Any]:
    """The raw (uncompleted) catalog entry of ``kernel`` on ``arch``."""
    entry: dict[str, Any] = catalog.load_packaged("attention")["attention"][kernel]["archs"][arch]
    return entry


def _table(kernel: str, arch: str) -> attention.AttentionTable:
    """The completed table, which must exist."""
    t = attention.table(kernel, arch)
    assert t is not None, f"{kernel}/{arch} has no table"
    return t


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def _all_close(xs: tuple[float, ...] | list[float], ys: tuple[float, ...] | list[float]) -> bool:
    return len(xs) == len(ys) and all(_close(x, y) for x, y in zip(xs, ys, strict=True))


# --- the catalog's shape ------------------------------------------------------------------------


def test_catalog_lengths_are_the_published_ones() -> None:
    """The catalog's ``seq_len`` is 512..16k (the lengths every oracle below is written for)."""
    assert tuple(catalog.load_packaged("attention")["seq_len"]) == LENGTHS
    assert _table("flash2", "hopper").seq_len == LENGTHS


# --- _filled: nulls ------------------------------------------------------------------------------


def test_filled_interpolates_interior_null_in_log_length() -> None:
    """A null between two known points takes the value linear in log2(length): at 2000 between
    4 (at 1000) and 10 (at 8000) it is 1/3 of the way in log2, so 4 + 6/3 = 6."""
    assert attention._filled((1000, 2000, 8000), [4.0, None, 10.0]) == (4.0, 6.0, 10.0)


def test_filled_takes_end_values_at_the_ends_and_keeps_known_values() -> None:
    """Nulls before the first / after the last known point take that end value; the midpoint in
    log2 of 1024 (10) and 4096 (40) is 2048 -> 25; known values are kept (as floats) unchanged."""
    lengths = (512, 1024, 2048, 4096, 8192)
    out = attention._filled(lengths, [None, 10, None, 40, None])
    assert out == (10.0, 10.0, 25.0, 40.0, 40.0)
    assert all(type(v) is float for v in out)
    odd = [0.1 + 0.2, 1e-300, 123456.789, 7.0, 3.0]  # no nulls: returned exactly
    assert attention._filled(lengths, list(odd)) == tuple(odd)


def test_filled_catalog_nulls_by_hand() -> None:
    """The catalog's nulls: flash2/ampere fwd_bwd full 64 at 1k (132 at 512, 162 at 2k: the log2
    midpoint, 147), full 128 at 512 (first known value 173), flash3/hopper fwd full 256 at 1k
    (482 at 512, 707 at 2k: 594.5)."""
    ampere = _raw("flash2", "ampere")["fwd_bwd"]["full"]
    assert ampere[64][1] is None
    assert ampere[128][0] is None
    assert attention._filled(LENGTHS, list(ampere[64])) == (132.0, 147.0, 162.0, 171.0, 175.0, 176.0)
    assert attention._filled(LENGTHS, list(ampere[128]))[:2] == (173.0, 173.0)
    series = attention._series(_raw("flash3", "hopper")["fwd"])
    assert series[(FULL, 256)] == (482.0, 594.5, 707.0, 736.0, 746.0, 756.0)


# --- published forward kept exactly --------------------------------------------------------------


@pytest.mark.parametrize(("kernel", "arch"), [("flash2", "hopper"), ("flash3", "hopper"),
                                              ("cudnn", "hopper")])
def test_published_forward_is_kept_exactly(kernel: str, arch: str) -> None:
    """Every key of a raw ``fwd`` series appears in ``table().fwd`` with the raw values, nulls
    filled (no rule rewrites a published forward); no other forward key appears."""
    raw_fwd = _raw(kernel, arch)["fwd"]
    t = _table(kernel, arch)
    expected = {(mask == "causal", int(dim)): attention._filled(LENGTHS, list(values))
                for mask, by_dim in raw_fwd.items() for dim, values in by_dim.items()}
    assert t.fwd == expected


def test_published_forward_literals() -> None:
    """flash2/hopper fwd full 64 and flash3/hopper fwd causal 128, as printed in the catalog."""
    assert _table("flash2", "hopper").fwd[(FULL, 64)] == (282, 306, 318, 321, 322, 324)
    assert _table("flash3", "hopper").fwd[(CAUSAL, 128)] == (292, 423, 521, 579, 602, 616)


def test_published_backward_is_kept_exactly() -> None:
    """A raw ``bwd`` series is not rederived (flash2/hopper bwd full 64 and 128 are published even
    though fwd and fwd_bwd are published too, so rule 1 must not overwrite them)."""
    t = _table("flash2", "hopper")
    assert t.bwd[(FULL, 64)] == (198, 238, 264, 279, 287, 291)
    assert t.bwd[(FULL, 128)] == (214, 260, 291, 310, 318, 322)


# --- rule 1 --------------------------------------------------------------------------------------


def test_rule1_flash2_hopper_causal_by_hand() -> None:
    """Rule 1, flash2/hopper causal 64 at 512: fwd 180, fwd_bwd 141 ->
    bwd = 2.5 / (3.5/141 - 1/180) = 129.754...; at 16k: 299, 284 -> 2.5 / (3.5/284 - 1/299)."""
    bwd = _table("flash2", "hopper").bwd[(CAUSAL, 64)]
    assert _close(bwd[0], 2.5 / (3.5 / 141 - 1 / 180))
    assert bwd[0] == pytest.approx(129.7546, rel=1e-5)
    assert _close(bwd[-1], 2.5 / (3.5 / 284 - 1 / 299))


@pytest.mark.parametrize("dim", [64, 128])
def test_rule1_flash2_hopper_causal_from_raw_yaml(dim: int) -> None:
    """Rule 1 at every length of flash2/hopper causal 64 and 128, from the raw YAML numbers (the
    entry gives ``fwd`` and ``fwd_bwd`` but no causal ``bwd``)."""
    raw = _raw("flash2", "hopper")
    assert "causal" not in raw["bwd"]
    f, c = raw["fwd"]["causal"][dim], raw["fwd_bwd"]["causal"][dim]
    expected = [2.5 / (3.5 / ci - 1 / fi) for fi, ci in zip(f, c, strict=True)]
    t = _table("flash2", "hopper")
    assert _all_close(t.bwd[(CAUSAL, dim)], expected)
    assert t.fwd[(CAUSAL, dim)] == tuple(f)
    assert "bwd from fwd and fwd_bwd" in t.derived


# --- rule 2 --------------------------------------------------------------------------------------


def test_rule2_flash2_ampere_full64_at_512_by_hand() -> None:
    """Rule 2, flash2/ampere full 64 at 512 (fwd_bwd 132; donor flash2/hopper full 64: fwd 282,
    bwd 198, r = 198/282): fwd = 132 (1 + 2.5 * 282/198) / 3.5 = 132 * 903/693 = 172,
    bwd = 172 * 198/282 = 120.766..."""
    t = _table("flash2", "ampere")
    r = 198 / 282
    fwd = 132 * (1 + 2.5 / r) / 3.5
    assert _close(t.fwd[(FULL, 64)][0], fwd)
    assert _close(t.bwd[(FULL, 64)][0], fwd * r)
    assert t.fwd[(FULL, 64)][0] == pytest.approx(172.0, rel=1e-12)
    assert t.bwd[(FULL, 64)][0] == pytest.approx(120.7660, rel=1e-5)
    assert t.bwd[(FULL, 64)][0] < t.fwd[(FULL, 64)][0]  # the donor's backward is the slower


@pytest.mark.parametrize(("kernel", "arch"), [("flash2", "ampere"), ("flash1", "hopper"),
                                              ("xformers", "ampere")])
def test_rule2_split_from_raw_yaml(kernel: str, arch: str) -> None:
    """Rule 2 at every point of an entry given only as ``fwd_bwd``: fwd = c (1 + 2.5/r) / 3.5,
    bwd = fwd * r with r the donor (flash2/hopper) table's bwd/fwd at the same point."""
    raw = _raw(kernel, arch)
    assert "fwd" not in raw
    assert "bwd" not in raw
    assert raw["donor"] == ["flash2", "hopper"]
    donor = _table("flash2", "hopper")
    t = _table(kernel, arch)
    for key, both in attention._series(raw["fwd_bwd"]).items():
        ratios = [donor.bwd[key][i] / donor.fwd[key][i] for i in range(len(LENGTHS))]
        fwd = [c * (1 + 2.5 / r) / 3.5 for c, r in zip(both, ratios, strict=True)]
        assert _all_close(t.fwd[key], fwd), key
        assert _all_close(t.bwd[key], [f * r for f, r in zip(fwd, ratios, strict=True)]), key
    assert t.derived == frozenset({"fwd and bwd split from fwd_bwd"})


def test_donor_ratios_are_backward_over_forward() -> None:
    """``_donor_ratios`` of flash2/hopper full 128: the published bwd over fwd, 214/309 at 512
    ... 322/370 at 16k."""
    donor = _table("flash2", "hopper")
    ratios = attention._donor_ratios(donor, "x", (FULL, 128), LENGTHS)
    bwd, fwd = (214, 260, 291, 310, 318, 322), (309, 350, 362, 368, 370, 370)
    assert _all_close(ratios, [b / f for b, f in zip(bwd, fwd, strict=True)])


def _derived_keys() -> list[tuple[str, str, tuple[bool, int], tuple[float, ...]]]:
    """(kernel, arch, key, fwd_bwd values) of every series completed by rule 1 or rule 2."""
    out = []
    for kernel, arch in [("flash2", "hopper"), ("flash2", "ampere"), ("flash1", "ampere"),
                         ("flash1", "hopper"), ("xformers", "ampere")]:
        raw = _raw(kernel, arch)
        published_bwd = attention._series(raw.get("bwd"))
        for key, both in attention._series(raw["fwd_bwd"]).items():
            if key not in published_bwd:
                out.append((kernel, arch, key, both))
    return out


def test_combined_time_is_conserved_for_every_derived_series() -> None:
    """Rules 1 and 2 (property): wherever the backward (and perhaps forward) was derived from a
    published ``fwd_bwd`` value c, the time is conserved: 1/fwd + 2.5/bwd == 3.5/c per length."""
    derived = _derived_keys()
    assert len(derived) == 2 + 4 + 4 + 4 + 4
    for kernel, arch, key, both in derived:
        t = _table(kernel, arch)
        for f, b, c in zip(t.fwd[key], t.bwd[key], both, strict=True):
            assert math.isclose(1 / f + 2.5 / b, 3.5 / c, rel_tol=1e-12), (kernel, arch, key)


# --- rule 3 --------------------------------------------------------------------------------------


def test_rule3_causal_backward_from_full_backward_by_hand() -> None:
    """Rule 3 (other mask), flash3/hopper causal 64 at 512: the published full bwd 272 times the
    donor's causal/full bwd; donor flash2/hopper causal bwd there is rule 1's
    2.5/(3.5/141 - 1/180), full bwd 198 -> 272 * 129.754.../198 = 178.24..."""
    donor_causal = 2.5 / (3.5 / 141 - 1 / 180)
    bwd = _table("flash3", "hopper").bwd[(CAUSAL, 64)]
    assert _close(bwd[0], 272 * donor_causal / 198)
    assert bwd[0] == pytest.approx(178.2492, rel=1e-5)


@pytest.mark.parametrize(("kernel", "dim"), [("flash3", 64), ("flash3", 128), ("cudnn", 64),
                                             ("cudnn", 128)])
def test_rule3_other_mask_from_raw_yaml(kernel: str, dim: int) -> None:
    """Rule 3 (other mask) at every length: the causal backward of flash3 and cudnn on Hopper
    (only the full backward is published) is the raw full bwd times the donor's (flash2/hopper)
    causal bwd over its full bwd (the raw full bwd, the causal one by rule 1 from raw numbers)."""
    raw, donor_raw = _raw(kernel, "hopper"), _raw("flash2", "hopper")
    assert "causal" not in raw["bwd"]
    donor_causal = [2.5 / (3.5 / c - 1 / f) for f, c in
                    zip(donor_raw["fwd"]["causal"][dim], donor_raw["fwd_bwd"]["causal"][dim],
                        strict=True)]
    donor_full = donor_raw["bwd"]["full"][dim]
    expected = [b * dc / df for b, dc, df in
                zip(raw["bwd"]["full"][dim], donor_causal, donor_full, strict=True)]
    t = _table(kernel, "hopper")
    assert _all_close(t.bwd[(CAUSAL, dim)], expected)
    assert t.bwd[(FULL, dim)] == tuple(raw["bwd"]["full"][dim])


@pytest.mark.parametrize("kernel", ["flash3", "cudnn"])
def test_rule3_no_backward_at_the_head_dim_from_raw_yaml(kernel: str) -> None:
    """Rule 3 (no backward at all for head dim 256 on Hopper): full 256 bwd = fwd times the
    donor's bwd/fwd, the donor (flash2/hopper, dims 64 and 128) taking its nearest dim, 128; then
    causal 256 bwd = that full bwd times the donor's causal/full bwd at 128."""
    raw, donor_raw = _raw(kernel, "hopper"), _raw("flash2", "hopper")
    fwd_full = attention._filled(LENGTHS, list(raw["fwd"]["full"][256]))
    ratio = [b / f for b, f in zip(donor_raw["bwd"]["full"][128], donor_raw["fwd"]["full"][128],
                                   strict=True)]
    full = [f * r for f, r in zip(fwd_full, ratio, strict=True)]
    donor_causal = [2.5 / (3.5 / c - 1 / f) for f, c in
                    zip(donor_raw["fwd"]["causal"][128], donor_raw["fwd_bwd"]["causal"][128],
                        strict=True)]
    causal = [b * dc / df for b, dc, df in
              zip(full, donor_causal, donor_raw["bwd"]["full"][128], strict=True)]
    t = _table(kernel, "hopper")
    assert _all_close(t.bwd[(FULL, 256)], full)
    assert _all_close(t.bwd[(CAUSAL, 256)], causal)
    assert t.derived == frozenset({"bwd from the donor's ratios"})


def test_rule3_flash3_full256_at_512_by_hand() -> None:
    """Rule 3, flash3/hopper full 256 at 512: fwd 482 times the donor's full 128 bwd/fwd 214/309
    = 333.812..."""
    bwd = _table("flash3", "hopper").bwd[(FULL, 256)][0]
    assert _close(bwd, 482 * 214 / 309)
    assert bwd == pytest.approx(333.8123, rel=1e-5)


class _StubDonor:
    """A donor table with hand-picked constant rates: fwd 100 and bwd 50 (full), fwd 80 and
    bwd 20 (causal); it answers only the two series ``AttentionTable.rate`` documents."""

    RATES: ClassVar[dict[tuple[str, bool], float]] = {
        ("fwd", False): 100.0, ("bwd", False): 50.0, ("fwd", True): 80.0, ("bwd", True): 20.0}

    def rate(self, series: str, causal: bool, head_dim: float, seq: float) -> float:
        if series not in ("fwd", "bwd"):
            raise ValueError(f"unknown series {series!r}")
        return self.RATES[(series, causal)]


def test_missing_backward_other_mask_with_stub_donor() -> None:
    """Rule 3 (other mask): causal bwd = full bwd x donor bwd(causal)/bwd(full) = b x 20/50, and
    the full one from the causal = b x 50/20; the donor is asked only for ``bwd`` rates."""
    donor = cast(attention.AttentionTable, _StubDonor())
    lengths = (512, 1024)
    fwd = {(True, 64): (1.0, 1.0), (False, 64): (1.0, 1.0)}
    out = attention._missing_backward(fwd, {(False, 64): (100.0, 200.0)}, donor, "k", (True, 64),
                                      lengths)
    assert _all_close(out, (40.0, 80.0))
    out = attention._missing_backward(fwd, {(True, 64): (10.0, 30.0)}, donor, "k", (False, 64),
                                      lengths)
    assert _all_close(out, (25.0, 75.0))


def test_missing_backward_from_forward_with_stub_donor() -> None:
    """Rule 3 (no other mask): bwd = fwd x donor bwd/fwd = f x 20/80 (causal), f x 50/100 (full)."""
    donor = cast(attention.AttentionTable, _StubDonor())
    fwd = {(True, 64): (40.0, 80.0), (False, 128): (10.0, 30.0)}
    assert _all_close(attention._missing_backward(fwd, {}, donor, "k", (True, 64), (512, 1024)),
                      (10.0, 20.0))
    assert _all_close(attention._missing_backward(fwd, {}, donor, "k", (False, 128), (512, 1024)),
                      (5.0, 15.0))


# --- rule 4 --------------------------------------------------------------------------------------


def test_rule4_alias_takes_the_other_kernels_table() -> None:
    """Rule 4: cudnn/ampere (alias flash2) and sdpa-flash/hopper (alias flash2) carry flash2's
    series on the same architecture and say so in ``derived``."""
    for kernel, arch in [("cudnn", "ampere"), ("sdpa-flash", "hopper")]:
        assert _raw(kernel, arch) == {"alias": "flash2"}
        t, other = _table(kernel, arch), _table("flash2", arch)
        assert (t.fwd, t.bwd, t.measured_on) == (other.fwd, other.bwd, other.measured_on)
        assert "alias" in t.derived
