"""The roofline primitives: GEMM rate from its shape, memory-bound ops, the flash-attention kernel.

Every operator is a GEMM (rate from its shape), a fused flash-attention kernel, or a memory-bound
elementwise op (bytes over achievable HBM bandwidth), and takes ``max(compute time, memory time)``.
Calibration (peaks, matmul efficiency, the GEMM size model, memory and attention efficiencies) is
accelerator data in the catalog.

GEMM rate model (docs/catalog.md, "GEMM size model"):

- accelerators with ``gemm_tiles`` (A100, H100; fitted on published GEMM sweeps):
  ``rate = peak * matmul_efficiency * tile_efficiency(M, N, K) / tile_efficiency(reference)``,
  where :func:`tile_efficiency` counts the output tiles, the waves they take over the SMs, a fixed
  per-tile cost in ``K`` and split-K (the best split up to ``max_split_k``);
- the others, with ``g(d) = d / (d + gemm_half_dim)``:
  ``rate = peak * matmul_efficiency * g(M) g(N) g(K) / g(8192)^3``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from simcluster.errors import SpecError
from simcluster.perf.cache import memoised
from simcluster.spec.hardware import AcceleratorSpec, GemmTileSpec

#: Bytes per element of each dtype (tf32 is stored as fp32).
DTYPE_BYTES: Final[dict[str, int]] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

#: The GEMM size at which ``matmul_efficiency`` is anchored (MAMF / mli n = 8192 measurements).
REFERENCE_GEMM_DIM: Final = 8192

# Flash-attention rates over the best-shape matmul rate are accelerator calibration data
# (AcceleratorSpec.attention_efficiency / attention_backward_efficiency, catalog/accelerators.yaml).

#: Real backward work of flash attention over its forward FLOPs: 5 matmuls (recompute S = QK^T, then
#: dV, dP, dQ, dK) against 2 forward (FlashAttention-2, arXiv 2307.08691, Algorithm 2; its
#: benchmark counts backward as 2.5x forward). MFU accounting uses the 2x convention; time uses
#: this.
FLASH_ATTENTION_BACKWARD_WORK: Final = 2.5

#: Share of the score matrix a causal flash kernel computes (tiles above the diagonal are skipped;
#: FlashAttention-2 benchmarks halve causal FLOPs). Unfused attention computes the full matrix.
CAUSAL_WORK_FRACTION: Final = 0.5

#: Adam bytes per updated parameter: fp32 master weight, m and v each read and written
#: (3 x 2 x 4 = 24), fp32 gradient read (4), 16-bit weight written (2) = 30 (Megatron distributed
#: optimizer layout).
ADAM_BYTES_PER_PARAM: Final = 30

#: Backward of an elementwise op reads the output gradient and the saved input and writes the input
#: gradient: about twice the forward bytes.
ELEMENTWISE_BACKWARD_BYTES_FACTOR: Final = 2.0

MASK_BYTES: Final = 1  # a dropout mask is stored as one byte per element (torch bool)


@dataclass(frozen=True, slots=True)
class OperatorTime:
    """One operator of a forward pass on one GPU.

    Attributes
    ----------
    name : str
        Operator (``qkv``, ``attention``, ``softmax``, ``mlp_up``, ``norm1`` ...).
    kind : str
        ``gemm``, ``attention`` (fused flash kernel) or ``memory`` (elementwise, bandwidth-bound).
    flops : float
        Forward FLOPs (standard convention: full score matrix, 2 FLOPs per multiply-add).
    bytes : float
        Forward HBM bytes read plus written.
    time_s : float
        Forward time, ``max(compute, memory)``.
    backward_s : float
        Backward time (input gradient plus weight gradient).
    wgrad_s : float
        The weight-gradient part of ``backward_s`` (zero for attention and elementwise ops).
    """

    name: str
    kind: str
    flops: float
    bytes: float
    time_s: float
    backward_s: float
    wgrad_s: float


@dataclass(frozen=True, slots=True)
class LayerTimes:
    """Forward, backward and recompute time of one block for one micro-batch on one GPU.

    Attributes
    ----------
    forward_s, backward_s : float
        Forward and full backward (dgrad + wgrad) time.
    wgrad_s : float
        Weight-gradient part of ``backward_s`` (the W of ZB-H1).
    recompute_s : float
        Extra forward work before backward under the recompute policy.
    operators : tuple[OperatorTime, ...]
        Per-operator breakdown of the forward pass.
    """

    forward_s: float
    backward_s: float
    wgrad_s: float
    recompute_s: float
    operators: tuple[OperatorTime, ...]


def bytes_per_element(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise SpecError("precision", f"unknown dtype {dtype!r}; expected {list(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def matmul_efficiency(acc: AcceleratorSpec, dtype: str) -> float:
    """Best-shape matmul rate over peak for ``dtype``.

    Falls back to the bf16 then the fp16 value (the same tensor cores) when ``dtype`` has none, and
    to 1.0 when neither is given.
    """
    for key in (dtype, "bf16", "fp16"):
        if key in acc.matmul_efficiency:
            return acc.matmul_efficiency[key]
    return 1.0


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
    best = acc.peak(dtype) * matmul_efficiency(acc, dtype)
    if acc.gemm_tiles is not None:
        tiles = acc.gemm_tiles
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


def memory_bound_time_s(acc: AcceleratorSpec, nbytes: float) -> float:
    """Time to stream ``nbytes`` through HBM: ``nbytes / (bandwidth * memory_efficiency)`` (s)."""
    return nbytes / (acc.memory_bandwidth_Bps * acc.memory_efficiency)


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


def memory_operator(acc: AcceleratorSpec, name: str, nbytes: float,
                    backward_factor: float = ELEMENTWISE_BACKWARD_BYTES_FACTOR) -> OperatorTime:
    """An elementwise op moving ``nbytes`` forward and ``backward_factor`` x that backward (~2x by
    default), no weight gradient."""
    forward = memory_bound_time_s(acc, nbytes)
    return OperatorTime(name, "memory", 0.0, nbytes, forward, backward_factor * forward, 0.0)


def causal_cp_fraction(cp: int, load_balance: bool) -> float:
    """Share of its ``s/cp x s`` score rectangle the busiest rank computes under a causal mask.

    Load-balanced (each rank holds chunks ``r`` and ``2cp-1-r`` of ``2cp``: Megatron-Core's context
    parallelism, Llama 3, Dubey et al. 2024 section 3.3.2) every rank does ``1/cp`` of the
    triangle: 1/2. Contiguous chunks: the last rank attends to every earlier chunk,
    ``(s/cp)^2 (cp - 1/2)`` pairs, so ``1 - 1/(2cp)`` (1/2 at ``cp = 1``, 15/16 at 8).
    """
    return CAUSAL_WORK_FRACTION if load_balance or cp == 1 else 1.0 - 1.0 / (2 * cp)


def flash_attention_operator(acc: AcceleratorSpec, dtype: str, flops: float, nbytes: float,
                             causal: bool, causal_fraction: float = CAUSAL_WORK_FRACTION
                             ) -> OperatorTime:
    """One fused flash-attention kernel (FlashAttention-2, arXiv 2307.08691).

    ``flops`` is the standard count (full score matrix); the kernel's real work is
    ``causal_fraction`` of it when causal (``CAUSAL_WORK_FRACTION``, or the busiest context-parallel
    rank's share, :func:`causal_cp_fraction`). Forward runs at ``acc.attention_efficiency`` and
    backward (``FLASH_ATTENTION_BACKWARD_WORK`` x the forward work) at
    ``acc.attention_backward_efficiency`` of the best-shape matmul rate.
    """
    best = acc.peak(dtype) * matmul_efficiency(acc, dtype)
    work = flops * (causal_fraction if causal else 1.0)
    memory = memory_bound_time_s(acc, nbytes)
    forward = max(work / (acc.attention_efficiency * best), memory)
    backward_work = FLASH_ATTENTION_BACKWARD_WORK * work
    backward = max(backward_work / (acc.attention_backward_efficiency * best), 2.0 * memory)
    return OperatorTime("attention", "attention", flops, nbytes, forward, backward, 0.0)
