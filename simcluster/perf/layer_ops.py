"""The pieces a transformer block's operator list is built from: per-GPU sizes, weight GEMMs, norms.

:mod:`simcluster.perf.compute` assembles a block from these; :mod:`.moe_layer` (the FFN, dense or
mixture of experts) and :mod:`.mla` (multi-head latent attention) build their parts of it with the
same helpers, so every GEMM is priced by :mod:`.kernels.gemm` (or :mod:`.kernels.lowp` under a
low-precision format) and every element-wise pass by :mod:`.kernels.elementwise`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.perf.kernels import eager
from simcluster.perf.kernels.elementwise import memory_operator
from simcluster.perf.kernels.gemm import gemm_operator
from simcluster.perf.kernels.lowp import LinearFormat, activation_dtype, linear_operators
from simcluster.perf.kernels.operator import OperatorTime, bytes_per_element
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec


def check_split(name: str, value: int, tp: int) -> None:
    """``SpecError`` at ``tp`` unless it divides ``value`` (the model's ``name``)."""
    if value % tp:
        raise SpecError("tp", f"{tp} does not divide {name}={value}")


@dataclass(frozen=True, slots=True)
class Shape:
    """Per-GPU sizes of one block: tokens, sequence split, heads and widths after TP/CP/EP."""

    batch: int
    seq: int
    tokens: float  # b*s/cp: tokens whose GEMMs this GPU runs
    norm_tokens: float  # tokens the norms, dropouts and residuals touch (/tp with SP)
    heads: float  # query heads on this GPU
    kv_width: float  # kv_heads*head_dim on this GPU (K or V)
    size: float  # bytes per element of the activations (bf16 under a low-precision format)
    cp: int  # context-parallel ranks the sequence is split over


def block_shape(model: ModelSpec, dtype: str, b: int, s: int, tp: int, cp: int,
                sp: bool) -> Shape:
    """The :class:`Shape` of ``b`` sequences of ``s`` tokens under TP ``tp``, CP ``cp``, SP."""
    if min(b, s, tp, cp) < 1:
        raise SpecError("parallelism", f"micro_batch, seq_len, tp, cp must be >= 1, got {b}, {s}, "
                        f"{tp}, {cp}")
    check_split("heads", model.heads, tp)
    tokens = b * s / cp
    kv_width = max(model.kv_heads / tp, 1.0) * model.head_dim  # KV heads replicate when tp > kv
    return Shape(b, s, tokens, tokens / tp if sp else tokens, model.heads / tp, kv_width,
                 bytes_per_element(activation_dtype(dtype)), cp)


def linear(acc: AcceleratorSpec, lin: LinearFormat, name: str,
           shape: tuple[float, float, float], batch: float = 1.0, *, input_fused: bool = True,
           grad_fused: bool = False) -> list[OperatorTime]:
    """A weight GEMM; its bias add, if any, is fused into the GEMM epilogue.

    torch ``addmm`` (``nn.Linear``) and Megatron's bias-GeLU and bias-dropout-add fusions never
    write the pre-bias output, so a bias costs one read of an ``n``-vector: nothing at this scale.
    Under a low-precision format, :func:`.kernels.lowp.linear_operators` (the GEMMs at its rate
    and the casts of the input and the output gradient).
    """
    if lin.recipe == "none":
        return [gemm_operator(acc, lin.dtype, name, shape, batch)]
    return linear_operators(acc, lin, name, shape, batch, input_fused, grad_fused)


def norm(model: ModelSpec, acc: AcceleratorSpec, name: str, elements: float, size: float,
         eager_ops: bool) -> OperatorTime:
    """A norm over ``elements``: one fused kernel (read, write), or torchtitan's eager RMSNorm chain
    (eager LayerNorm is PyTorch's native single kernel, the same as fused)."""
    if eager_ops and model.norm == "rmsnorm":
        return eager.rmsnorm(acc, name, elements)
    return memory_operator(acc, name, 2 * elements * size)


#: The :class:`OperatorTime` fields that add up over blocks (all but its name and kind).
_ADDITIVE = ("flops", "bytes", "time_s", "backward_s", "wgrad_s", "launches")


def scaled(op: OperatorTime, weight: float) -> OperatorTime:
    """``op`` counted ``weight`` times (a block kind's share of the layers)."""
    return dataclasses.replace(op, **{f: getattr(op, f) * weight for f in _ADDITIVE})


def blend(a: OperatorTime, b: OperatorTime, share: float) -> OperatorTime:
    """One operator that is ``b`` in ``share`` of the blocks and ``a`` in the rest (its name and
    kind are ``a``'s): the mean over the blocks of a model whose blocks differ in that operator."""
    x, y = scaled(a, 1.0 - share), scaled(b, share)
    return dataclasses.replace(x, **{f: getattr(x, f) + getattr(y, f) for f in _ADDITIVE})
