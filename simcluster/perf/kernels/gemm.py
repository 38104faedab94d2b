"""GEMM time from its shape: the tile/wave model (A100, H100) or the half-dimension curve.

GEMM rate model (docs/catalog.md, "GEMM size model"):

- accelerators with ``gemm_tiles`` (A100, H100; fitted on published GEMM sweeps):
  ``rate = peak * matmul_efficiency * tile_efficiency(M, N, K) / tile_efficiency(reference)``,
  where :func:`tile_efficiency` counts the output tiles, the waves they take over the SMs, a fixed
  per-tile cost in ``K`` and split-K (the best split up to ``max_split_k``);
- the others, with ``g(d) = d / (d + gemm_half_dim)``:
  ``rate = peak * matmul_efficiency * g(M) g(N) g(K) / g(8192)^3``.

Each pass takes ``max(compute, memory)``: a skinny GEMM can be bound by the bytes of its operands.
"""

from __future__ import annotations

import math
from typing import Final

from simcluster.errors import SpecError
from simcluster.perf.cache import memoised
from simcluster.perf.kernels.clock import clock_fraction
from simcluster.perf.kernels.elementwise import memory_bound_time_s
from simcluster.perf.kernels.operator import OperatorTime, bytes_per_element
from simcluster.spec.hardware import AcceleratorSpec, GemmTileSpec

#: The GEMM size at which ``matmul_efficiency`` is anchored (MAMF / mli n = 8192 measurements).
REFERENCE_GEMM_DIM: Final = 8192


def matmul_efficiency(acc: AcceleratorSpec, dtype: str) -> float:
    """Best-shape matmul rate over peak for ``dtype``.

    Falls back to the bf16 then the fp16 value (the same tensor cores) when ``dtype`` has none, and
    to 1.0 when neither is given.
    """
    for key in (dtype, "bf16", "fp16"):
        if key in acc.matmul_efficiency:
            return acc.matmul_efficiency[key]
    return 1.0


def best_matmul_flops_per_s(acc: AcceleratorSpec, dtype: str) -> float:
    """The rate at the reference shape: ``peak * matmul_efficiency``, times the clock a power limit
    below the TDP leaves (:func:`~.clock.clock_fraction`)."""
    return acc.peak(dtype) * matmul_efficiency(acc, dtype) * clock_fraction(acc)


def size_factor(dim: float, half_dim: float) -> float:
    """Per-dimension GEMM efficiency factor ``g(d) = d / (d + half_dim)`` (docs/catalog.md)."""
    return dim / (dim + half_dim)


def tile_efficiency(tiles: GemmTileSpec, m: float, n: float, k: float,
                    batch: float = 1.0) -> float:
    """Useful work over the SM time a tiled GEMM occupies, in ``(0, 1]`` (docs/catalog.md).

    ``batch`` GEMMs of ``[m, k] x [k, n]`` give ``B = batch * ceil(m/tile_m) * ceil(n/tile_n)``
    output tiles. Split ``s`` ways over ``K`` (``s`` = 1, 2, 4 ... ``max_split_k``), they are
    ``B*s`` thread blocks run in ``ceil(B*s / sms)`` waves, each block costing ``K/s + k_overhead``
    steps of a full tile. The efficiency of the best split is
    ``batch*m*n*k / (sms * waves * tile_m * tile_n * (k/s + k_overhead))``: tile quantization
    (padding in the last tile row and column), wave quantization (idle SMs in the last wave) and
    the per-tile fixed cost.
    """
    blocks = math.ceil(batch * math.ceil(m / tiles.tile_m) * math.ceil(n / tiles.tile_n))
    useful = batch * m * n * k
    tile_area = tiles.sms * tiles.tile_m * tiles.tile_n
    best, split = 0.0, 1
    while split <= tiles.max_split_k:
        waves = math.ceil(blocks * split / tiles.sms)
        best = max(best, useful / (tile_area * waves * (k / split + tiles.k_overhead)))
        split *= 2
    return best


@memoised()
def reference_tile_efficiency(tiles: GemmTileSpec) -> float:
    """:func:`tile_efficiency` at ``tiles.reference_mnk`` (where ``matmul_efficiency`` was measured)."""
    m, n, k = tiles.reference_mnk
    return tile_efficiency(tiles, m, n, k)


def achievable_matmul_flops_per_s(acc: AcceleratorSpec, dtype: str, m: float, n: float,
                                  k: float, batch: float = 1.0) -> float:
    """Achievable FLOP/s of ``batch`` ``[m, k] x [k, n]`` GEMMs run as one kernel.

    With ``acc.gemm_tiles``: ``peak * eff * tile_efficiency(m, n, k, batch) / tile_efficiency(ref)``.
    Otherwise ``peak * eff * g(m') g(n') g(k) / g(8192)^3`` (eff from MAMF or mli n = 8192), with
    a batch counted as one GEMM ``sqrt(batch)`` times larger in ``m`` and ``n`` (the same number of
    output tiles to spread over the SMs; ``k``, the per-tile loop, unchanged).

    Parameters
    ----------
    acc : AcceleratorSpec
        The accelerator (``SpecError`` when it has no peak for ``dtype``).
    dtype : str
        Operand dtype.
    m, n, k : float
        Output rows, output columns and reduction length (elements, > 0).
    batch : float
        GEMMs of that shape in the kernel (> 0).

    Returns
    -------
    float
        FLOP/s; equals ``peak * eff`` at the reference shape and can exceed it for better shapes.
    """
    if min(m, n, k, batch) <= 0:
        raise SpecError("gemm", f"dimensions and batch must be > 0, got m={m}, n={n}, "
                        f"k={k}, batch={batch}")
    best = best_matmul_flops_per_s(acc, dtype)
    tiles = acc.tiles(dtype)
    if tiles is not None:
        return best * tile_efficiency(tiles, m, n, k, batch) / reference_tile_efficiency(tiles)
    half = acc.gemm_half_dim
    if batch != 1.0:
        spread = math.sqrt(batch)
        m, n = spread * m, spread * n
    shape = size_factor(m, half) * size_factor(n, half) * size_factor(k, half)
    reference = size_factor(REFERENCE_GEMM_DIM, half) ** 3
    return best * shape / reference


def gemm_time_s(acc: AcceleratorSpec, dtype: str, m: float, n: float, k: float) -> float:
    """Compute time of one GEMM, ``2mnk / achievable_matmul_flops_per_s`` (seconds)."""
    return 2.0 * m * n * k / achievable_matmul_flops_per_s(acc, dtype, m, n, k)


def gemm_operator(acc: AcceleratorSpec, dtype: str, name: str, shape: tuple[float, float, float],
                  batch: float = 1.0, weight: bool = True) -> OperatorTime:
    """A (batched) GEMM with its backward, each pass ``max(compute, memory)``.

    Forward ``C[m,n] = A[m,k] B[k,n]``; backward dgrad ``dA = dC B^T`` (shape m, k, n) and wgrad
    ``dB = A^T dC`` (shape k, n, m), the same FLOPs each. Bytes per pass are the three matrices. For
    the rate, a batch of GEMMs counts as one GEMM with ``sqrt(batch)`` times larger ``m`` and ``n``:
    the same number of output tiles to spread over the SMs; ``k`` (the per-tile loop) is unchanged.
    ``weight=False`` (attention score/AV GEMMs) files both backward GEMMs as input gradients.
    """
    m, n, k = shape
    size = bytes_per_element(dtype)
    nbytes = batch * (m * k + k * n + m * n) * size  # A, B read; C written

    def timed(mm: float, nn: float, kk: float) -> float:
        rate = achievable_matmul_flops_per_s(acc, dtype, mm, nn, kk, batch)
        return max(2.0 * batch * mm * nn * kk / rate, memory_bound_time_s(acc, nbytes))

    dgrad, wgrad = timed(m, k, n), timed(k, n, m)
    return OperatorTime(name, "gemm", 2.0 * batch * m * n * k, nbytes, timed(m, n, k),
                        dgrad + wgrad, wgrad if weight else 0.0)
