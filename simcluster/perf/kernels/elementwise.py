"""Memory-bound kernels: bytes over the HBM bandwidth the accelerator achieves.

Norms, activations, residual adds, dropout, casts, an unfused softmax, the loss, the optimizer step
and the gradient copies do a few FLOPs per byte: their time is the bytes they read and write over
the bandwidth a streaming kernel achieves on that GPU (``memory_bandwidth_GBps x
memory_efficiency``, the fraction a measured element-wise or copy kernel reaches; catalog data per
accelerator, docs/catalog.md). GEMM compute grew faster than HBM bandwidth from one generation to
the next (A100 to H100: 3.2x the bf16 peak, 1.6x the bandwidth), so these kernels weigh more on
newer GPUs. Which kernels a layer runs, fused or as eager op chains, is the stack's choice
(:mod:`.eager`, :mod:`simcluster.perf.compute`).
"""

from __future__ import annotations

from typing import Final

from simcluster.perf.kernels.operator import OperatorTime
from simcluster.spec.hardware import AcceleratorSpec

#: Adam bytes per updated parameter: fp32 master weight, m and v each read and written
#: (3 x 2 x 4 = 24), fp32 gradient read (4), 16-bit weight written (2) = 30 (Megatron distributed
#: optimizer layout).
ADAM_BYTES_PER_PARAM: Final = 30

#: Backward of an element-wise op reads the output gradient and the saved input and writes the
#: input gradient: about twice the forward bytes.
ELEMENTWISE_BACKWARD_BYTES_FACTOR: Final = 2.0

MASK_BYTES: Final = 1  # a dropout mask is stored as one byte per element (torch bool)


def achieved_bandwidth_Bps(acc: AcceleratorSpec) -> float:
    """HBM bytes per second a streaming kernel achieves: ``bandwidth x memory_efficiency``."""
    return acc.memory_bandwidth_Bps * acc.memory_efficiency


def memory_bound_time_s(acc: AcceleratorSpec, nbytes: float) -> float:
    """Time to stream ``nbytes`` through HBM at :func:`achieved_bandwidth_Bps` (s)."""
    return nbytes / achieved_bandwidth_Bps(acc)


def memory_operator(acc: AcceleratorSpec, name: str, nbytes: float,
                    backward_factor: float = ELEMENTWISE_BACKWARD_BYTES_FACTOR) -> OperatorTime:
    """An element-wise op moving ``nbytes`` forward and ``backward_factor`` x that backward (~2x by
    default), no weight gradient."""
    forward = memory_bound_time_s(acc, nbytes)
    return OperatorTime(name, "memory", 0.0, nbytes, forward, backward_factor * forward, 0.0)
