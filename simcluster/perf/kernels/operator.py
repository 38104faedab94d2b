"""What a kernel model answers: the time of one operator's forward and backward on one GPU.

Every operator of a layer is a GEMM (:mod:`.gemm`), an attention kernel (:mod:`.attention`) or a
memory-bound element-wise kernel (:mod:`.elementwise`, :mod:`.eager`); each module returns an
:class:`OperatorTime`, and the layer model (:mod:`simcluster.perf.compute`) sums them into
:class:`LayerTimes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from simcluster.errors import SpecError

#: Bytes per element of each dtype (tf32 is stored as fp32; fp4 packs two elements a byte).
DTYPE_BYTES: Final[dict[str, float]] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1,
                                        "fp4": 0.5}


@dataclass(frozen=True, slots=True)
class OperatorTime:
    """One operator of a forward pass on one GPU.

    Attributes
    ----------
    name : str
        Operator (``qkv``, ``attention``, ``softmax``, ``mlp_up``, ``norm1`` ...).
    kind : str
        ``gemm``, ``attention`` (fused attention kernel) or ``memory`` (element-wise,
        bandwidth-bound).
    flops : float
        Forward FLOPs (standard convention: full score matrix, 2 FLOPs per multiply-add).
    bytes : float
        Forward HBM bytes read plus written.
    time_s : float
        Forward time.
    backward_s : float
        Backward time (input gradient plus weight gradient).
    wgrad_s : float
        The weight-gradient part of ``backward_s`` (zero for attention and element-wise ops).
    launches : float
        Kernel calls the host issues for the forward (its backward issues twice as many): 1, or
        one per local expert for a grouped expert GEMM (Transformer Engine's ``GroupedLinear``
        runs ``general_grouped_gemm``, one cuBLAS GEMM per expert); a mean over block kinds
        where the blocks differ (:func:`~simcluster.perf.layer_ops.scaled`).
    """

    name: str
    kind: str
    flops: float
    bytes: float
    time_s: float
    backward_s: float
    wgrad_s: float
    launches: float = 1.0


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


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies (``SpecError`` at ``precision`` if unknown)."""
    if dtype not in DTYPE_BYTES:
        raise SpecError("precision", f"unknown dtype {dtype!r}; expected {list(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]
