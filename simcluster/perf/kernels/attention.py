"""Attention by kernel: forward and backward time from each kernel's published benchmarks.

``execution.attention`` names the kernel a stack runs (``flash2``, ``flash3``, ``cudnn``,
``triton-flash``, ``sdpa-flash``, ``flash1``, ``xformers``, or ``math``, the unfused path;
``auto``, the default without a stack, is the fastest published kernel for the architecture:
FlashAttention-3 on Hopper, FlashAttention-2 elsewhere). A fused
kernel's rate is a function of the GPU architecture, the head dimension, the causal mask and the
sequence length, read from the kernel's published throughput tables
(``simcluster/catalog/attention.yaml``, docs/catalog.md "Attention kernels"), never one
efficiency per GPU: FlashAttention-2 reaches 35% of an H100's bf16 peak where FlashAttention-3
and cuDNN, which use Hopper's warpgroup MMA, reach 60%, and every kernel is slower on short
sequences (fewer key blocks per query block to amortise its prologue) and with a causal mask (the
diagonal blocks).

Rates follow the FlashAttention benchmarks' convention: the work of a causal kernel is half the
score matrix, the backward is 2.5x the forward's FLOPs (five GEMMs against two: recompute
``S = QK^T``, then ``dV``, ``dP``, ``dQ``, ``dK``; Dao, arXiv 2307.08691, Algorithm 2). A table
completes what its sources left out by these rules, each from published numbers (docstring of
:func:`_complete`):

1. forward and forward+backward given: ``bwd = 2.5 / (3.5 / fwd_bwd - 1 / fwd)``;
2. only forward+backward given: split with the ``donor`` table's backward/forward ratio at the same
   point;
3. a mask's backward missing: the other mask's backward times the donor's ratio between masks;
   with no backward at all for a head dimension, the forward times the donor's backward/forward
   ratio;
4. ``alias``: another kernel's table on this architecture.

Lookup: piecewise linear in ``log2(seq)`` between the published lengths (512 to 16k), the end
values beyond them (every series is flat by 16k); linear in the head dimension between tables,
the nearest table outside. The sequence is the key length one kernel call sees: ``s`` without
context parallelism, ``s / cp`` with it (each step of the ring, or the gathered chunk, attends
``s/cp`` queries at a time).

A table was measured on one part (``measured_on``); another part of the same architecture takes it
scaled by the ratio of the two dense 16-bit peaks (an H200 as the H100 SXM; an H100 PCIe at
756/989; an RTX 3090 Ti at 80/312 of the A100): the kernels are compute-bound, and the parts
differ in SMs and clocks. That transfer is an estimate wherever it applies. Accelerators with no
``arch`` or no table for the kernel, and dtypes the kernels do not run (fp32, tf32), fall back to
``attention_efficiency`` and ``attention_backward_efficiency`` of the accelerator's reference
matmul rate (the model before kernel tables; docs/catalog.md says where). FP8 layers run attention
from the 16-bit tables (Transformer Engine keeps attention in bf16 unless FP8 attention is asked
for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from simcluster import catalog
from simcluster.errors import InvariantError, SpecError
from simcluster.perf.cache import memoised
from simcluster.perf.kernels.clock import clock_fraction
from simcluster.perf.kernels.elementwise import memory_bound_time_s
from simcluster.perf.kernels.gemm import best_matmul_flops_per_s
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.spec.execution import ATTENTION_KERNELS
from simcluster.spec.hardware import AcceleratorSpec

#: Real backward work of flash attention over its forward FLOPs: 5 matmuls (recompute S = QK^T, then
#: dV, dP, dQ, dK) against 2 forward (FlashAttention-2, arXiv 2307.08691, Algorithm 2; its
#: benchmark counts backward as 2.5x forward). MFU accounting uses the 2x convention; time uses
#: this.
FLASH_ATTENTION_BACKWARD_WORK: Final = 2.5

#: Share of the score matrix a causal flash kernel computes (tiles above the diagonal are skipped;
#: FlashAttention-2 benchmarks halve causal FLOPs). Unfused attention computes the full matrix.
CAUSAL_WORK_FRACTION: Final = 0.5

#: Dtypes the tabled (16-bit) kernels serve; fp8 layers keep attention in bf16.
TABLE_DTYPES: Final = ("bf16", "fp16", "fp8")

_Key = tuple[bool, int]  # (causal, head_dim)
_Series = dict[_Key, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class AttentionTable:
    """One kernel on one architecture: forward and backward TFLOP/s per (causal, head_dim), one
    value per length of ``seq_len``; ``derived`` names the series the loader computed."""

    kernel: str
    arch: str
    measured_on: str  # the catalog accelerator the rates were measured on
    seq_len: tuple[int, ...]
    fwd: _Series
    bwd: _Series
    derived: frozenset[str]
    source: str

    def rate(self, series: str, causal: bool, head_dim: float, seq: float) -> float:
        """TFLOP/s of ``series`` (``fwd`` or ``bwd``) at ``head_dim`` and sequence ``seq``."""
        table = self.fwd if series == "fwd" else self.bwd
        dims = sorted(d for c, d in table if c == causal)
        if not dims:
            raise InvariantError(f"attention table {self.kernel}/{self.arch} has no "
                                 f"{'causal' if causal else 'full'} {series} series")
        low = max((d for d in dims if d <= head_dim), default=dims[0])
        high = min((d for d in dims if d >= head_dim), default=dims[-1])
        at_low = _along_seq(self.seq_len, table[(causal, low)], seq)
        if high == low:
            return at_low
        at_high = _along_seq(self.seq_len, table[(causal, high)], seq)
        return at_low + (at_high - at_low) * (head_dim - low) / (high - low)


def _along_seq(lengths: tuple[int, ...], values: tuple[float, ...], seq: float) -> float:
    """Piecewise linear in ``log2(seq)``, the end values outside ``lengths``."""
    if seq <= lengths[0]:
        return values[0]
    if seq >= lengths[-1]:
        return values[-1]
    x = math.log2(seq)
    for (a, va), (b, vb) in zip(zip(lengths, values, strict=True),
                                zip(lengths[1:], values[1:], strict=True), strict=False):
        if a <= seq <= b:
            la, lb = math.log2(a), math.log2(b)
            return va + (vb - va) * (x - la) / (lb - la)
    raise InvariantError(f"sequence {seq} not bracketed by {lengths}")


@cache
def _catalog() -> tuple[tuple[int, ...], dict[str, Any]]:
    data = catalog.load_packaged("attention")
    return tuple(int(v) for v in data["seq_len"]), data["attention"]


def kernel_names() -> tuple[str, ...]:
    """The kernels of the catalog (``math`` included), in catalog order."""
    return tuple(_catalog()[1])


def kernel_entry(kernel: str) -> dict[str, Any]:
    """The catalog entry of ``kernel`` (description and per-architecture tables)."""
    entry: dict[str, Any] = _catalog()[1][kernel]
    return entry


@cache
def table(kernel: str, arch: str) -> AttentionTable | None:
    """The completed table of ``kernel`` on ``arch``; None when none is published or derivable."""
    raw = _catalog()[1].get(kernel, {}).get("archs", {}).get(arch)
    if raw is None:
        return None
    return _complete(kernel, arch, raw)


def _complete(kernel: str, arch: str, raw: dict[str, Any]) -> AttentionTable:
    """Apply the module docstring's rules 1-4 to the published series of ``raw``."""
    lengths = _catalog()[0]
    if "alias" in raw:
        other = table(str(raw["alias"]), arch)
        if other is None:
            raise InvariantError(f"{kernel}/{arch} aliases {raw['alias']}, which has no table")
        return AttentionTable(kernel, arch, other.measured_on, lengths, other.fwd, other.bwd,
                              other.derived | {"alias"}, f"alias of {raw['alias']}: {other.source}")
    fwd, bwd = _series(raw.get("fwd")), _series(raw.get("bwd"))
    both = _series(raw.get("fwd_bwd"))
    donor = table(*raw["donor"]) if "donor" in raw else None
    derived: set[str] = set()
    for key in sorted(set(fwd) | set(both)):
        if key in fwd and key in both and key not in bwd:  # rule 1
            bwd[key] = tuple(2.5 / _positive(3.5 / c - 1.0 / f, kernel)
                             for f, c in zip(fwd[key], both[key], strict=True))
            derived.add("bwd from fwd and fwd_bwd")
        elif key not in fwd and key in both:  # rule 2
            ratios = _donor_ratios(donor, kernel, key, lengths)
            fwd[key] = tuple(c * (1 + 2.5 / r) / 3.5 for c, r in zip(both[key], ratios, strict=True))
            bwd[key] = tuple(f * r for f, r in zip(fwd[key], ratios, strict=True))
            derived.add("fwd and bwd split from fwd_bwd")
    for key in sorted(set(fwd) - set(bwd)):  # rule 3
        bwd[key] = _missing_backward(fwd, bwd, donor, kernel, key, lengths)
        derived.add("bwd from the donor's ratios")
    return AttentionTable(kernel, arch, str(raw["measured_on"]), lengths, fwd, bwd,
                          frozenset(derived), str(raw.get("source", "")))


def _donor_ratios(donor: AttentionTable | None, kernel: str, key: _Key,
                  lengths: tuple[int, ...]) -> list[float]:
    if donor is None:
        raise InvariantError(f"attention table {kernel}: a derived series needs a donor")
    causal, dim = key
    return [donor.rate("bwd", causal, dim, s) / donor.rate("fwd", causal, dim, s) for s in lengths]


def _missing_backward(fwd: _Series, bwd: _Series, donor: AttentionTable | None, kernel: str,
                      key: _Key, lengths: tuple[int, ...]) -> tuple[float, ...]:
    causal, dim = key
    other = (not causal, dim)
    if donor is None:
        raise InvariantError(f"attention table {kernel}: a derived series needs a donor")
    if other in bwd:  # the other mask's backward x the donor's ratio between masks
        return tuple(b * donor.rate("bwd", causal, dim, s) / donor.rate("bwd", not causal, dim, s)
                     for b, s in zip(bwd[other], lengths, strict=True))
    ratios = _donor_ratios(donor, kernel, key, lengths)
    return tuple(f * r for f, r in zip(fwd[key], ratios, strict=True))


def _positive(value: float, kernel: str) -> float:
    if value <= 0:
        raise InvariantError(f"attention table {kernel}: fwd_bwd not below 3.5x fwd")
    return value


def _series(raw: dict[str, Any] | None) -> _Series:
    """``{causal|full: {head_dim: [values]}}`` -> ``{(causal, head_dim): values}``, nulls filled
    by log-length interpolation between their neighbours (the end value at the ends)."""
    lengths = _catalog()[0]
    out: _Series = {}
    for mask, by_dim in (raw or {}).items():
        for dim, values in by_dim.items():
            out[(mask == "causal", int(dim))] = _filled(lengths, list(values))
    return out


def _filled(lengths: tuple[int, ...], values: list[float | None]) -> tuple[float, ...]:
    known = [(n, float(v)) for n, v in zip(lengths, values, strict=True) if v is not None]
    xs, ys = tuple(n for n, _ in known), tuple(v for _, v in known)
    return tuple(float(v) if v is not None else _along_seq(xs, ys, n)
                 for n, v in zip(lengths, values, strict=True))


#: ``auto``: the fastest published kernel per architecture (FlashAttention-3 where it runs).
AUTO_KERNELS: Final = {"hopper": "flash3"}


def resolve_kernel(acc: AcceleratorSpec, kernel: str) -> str:
    """The kernel ``kernel`` names on ``acc`` (``auto``: :data:`AUTO_KERNELS`, else ``flash2``);
    ``SpecError`` at ``execution.attention`` for one this accelerator cannot run."""
    if kernel not in ATTENTION_KERNELS:
        raise SpecError("execution.attention",
                        f"{kernel!r} is not one of {', '.join(ATTENTION_KERNELS)}")
    if kernel == "auto":
        return AUTO_KERNELS.get(acc.arch, "flash2")
    if kernel == "flash3" and acc.arch not in ("", "hopper"):
        raise SpecError("execution.attention", f"flash3 runs on Hopper (sm90) only; "
                        f"{acc.name} is {acc.arch}: use flash2, cudnn or sdpa-flash")
    return kernel


@memoised()
def fused_rates(acc_arch: str, kernel: str, dtype: str, head_dim: float, seq: float,
                causal: bool) -> tuple[float, float, str] | None:
    """Forward and backward FLOP/s of ``kernel`` on the part its table was measured on (work
    convention of the module docstring) and that part's name, or None when no table applies
    (the caller falls back to the efficiency model)."""
    if dtype not in TABLE_DTYPES:
        return None
    t = table(kernel, acc_arch)
    if t is None:
        return None
    return (t.rate("fwd", causal, head_dim, seq) * 1e12,
            t.rate("bwd", causal, head_dim, seq) * 1e12, t.measured_on)


@cache
def _table_peak(accelerator: str) -> float:
    """Dense 16-bit peak (FLOP/s) of the catalog part a table was measured on."""
    peaks = catalog.entry("accelerators", accelerator)["peak_TFLOPS"]
    return float(peaks.get("bf16", peaks.get("fp16"))) * 1e12


def part_scale(acc: AcceleratorSpec, measured_on: str) -> float:
    """What a table measured on ``measured_on`` is worth on ``acc``: the ratio of their dense
    16-bit peaks (1 on the part itself or one of the same compute), times the clock a power limit
    leaves (:mod:`.clock`)."""
    peaks = acc.peak_flops_per_s
    own = peaks.get("bf16", peaks.get("fp16", 0.0))
    return own / _table_peak(measured_on) * clock_fraction(acc)


def fused_attention_operator(acc: AcceleratorSpec, dtype: str, kernel: str, flops: float,
                             nbytes: float, head_dim: float, seq: float, causal: bool,
                             causal_fraction: float = CAUSAL_WORK_FRACTION) -> OperatorTime:
    """One fused attention kernel: forward and backward time of ``flops`` (full score matrix).

    The kernel's work is ``causal_fraction`` of ``flops`` when causal; forward and backward take
    that work (2.5x backward) at the kernel's tabled rates, or, without a table, at
    ``attention_efficiency`` / ``attention_backward_efficiency`` of the reference matmul rate;
    both at the clock the power limit leaves (:mod:`.clock`); never faster than its HBM bytes
    (``nbytes`` forward, twice backward).
    """
    work = flops * (causal_fraction if causal else 1.0)
    memory = memory_bound_time_s(acc, nbytes)
    tabled = fused_rates(acc.arch, kernel, dtype, head_dim, seq, causal)
    if tabled is None:
        best = best_matmul_flops_per_s(acc, dtype)
        rates = (acc.attention_efficiency * best, acc.attention_backward_efficiency * best)
    else:
        scale = part_scale(acc, tabled[2])
        rates = (tabled[0] * scale, tabled[1] * scale)
    forward = max(work / rates[0], memory)
    backward = max(FLASH_ATTENTION_BACKWARD_WORK * work / rates[1], 2.0 * memory)
    return OperatorTime("attention", "attention", flops, nbytes, forward, backward, 0.0)


def causal_cp_fraction(cp: int, load_balance: bool) -> float:
    """Share of its ``s/cp x s`` score rectangle the busiest rank computes under a causal mask.

    Load-balanced (each rank holds chunks ``r`` and ``2cp-1-r`` of ``2cp``: Megatron-Core's context
    parallelism, Llama 3, Dubey et al. 2024 section 3.3.2) every rank does ``1/cp`` of the
    triangle: 1/2. Contiguous chunks: the last rank attends to every earlier chunk,
    ``(s/cp)^2 (cp - 1/2)`` pairs, so ``1 - 1/(2cp)`` (1/2 at ``cp = 1``, 15/16 at 8).
    """
    return CAUSAL_WORK_FRACTION if load_balance or cp == 1 else 1.0 - 1.0 / (2 * cp)
