"""Eager-mode element-wise kernels: the HBM traffic of unfused op chains, counted from their code.

A fused framework (Megatron-LM, Transformer Engine) runs a normalisation, a rotary embedding, the
SwiGLU gate or the loss as one kernel that reads its inputs and writes its output once. Eager
PyTorch runs the same maths as the chain of ops the model's Python code spells out, each a kernel
that reads and writes a whole tensor, often in fp32. The byte counts below walk that code for
torchtitan's Llama (the FSDP2 runs validated in docs/validation.md): ``torchtitan/models/norms.py``
``RMSNorm`` and ``torchtitan/models/llama/model.py`` ``apply_rotary_emb``, ``repeat_kv``,
``Attention.forward``, ``FeedForward.forward`` and the trainer's
``F.cross_entropy(pred.flatten(0, 1).float(), labels)``. Per element of the tensor each op touches,
with bf16 activations (2 B) and the fp32 (4 B) intermediates the code creates:

- RMSNorm: ``x.float()`` 2+4, ``pow(2)`` 4+4, ``mean(-1)`` 4, ``x * rsqrt`` 4+4, ``type_as`` 4+2,
  ``* weight`` 2+2: 36 B (fused: read 2, write 2 = 4 B); 6 kernels on whole tensors.
- RoPE on q and k: ``float()`` 2+4, complex multiply 4+4, ``type_as`` 4+2: 20 B (fused: 4 B).
- SwiGLU gate: ``silu(w1 x)`` 2+2, ``* w3 x`` 2+2+2: 10 B per FFN element (fused: 6 B).
- ``repeat_kv`` (grouped-query attention): ``expand(...).reshape`` materialises K and V at the
  query heads' width: read the KV heads, write the query-width copy (each of K and V).
- Attention output ``transpose(1, 2).contiguous()``: one copy of the output, 2+2 B.
- Loss: ``logits.float()`` 2+4 and ``log_softmax`` 4+4 per logit: 14 B (the fused vocab-parallel
  loss of Megatron reads and writes fp32 once: 8 B).

The backward of each chain moves about twice its forward bytes (the usual element-wise backward:
read the saved input and the incoming gradient, write the gradient), as for fused ops. Every eager
kernel also takes at least :data:`KERNEL_LAUNCH_S`, the launch cost a GPU pays per kernel: CUDA.jl's
documentation measures 80 broadcast kernels at 260 us when launched one by one (3.25 us each) and 70
us as one CUDA graph (JuliaGPU, "CUDA graphs", cuda.juliagpu.org/dev/usage/graphs). For the tensors of
a training step (megabytes) the launch floor never binds; it does for tiny shapes.
"""

from __future__ import annotations

from simcluster.perf.kernels.elementwise import (
    ELEMENTWISE_BACKWARD_BYTES_FACTOR,
    memory_bound_time_s,
)
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.spec.execution import ELEMENTWISE_MODES
from simcluster.spec.hardware import AcceleratorSpec

__all__ = ["ELEMENTWISE_MODES", "eager_operator", "loss", "output_copy", "repeat_kv", "rmsnorm",
           "rope", "swiglu"]
#: Bytes moved per element, forward, by torchtitan's eager chains (module docstring).
RMSNORM_EAGER_BYTES = 36.0
ROPE_EAGER_BYTES = 20.0
SWIGLU_EAGER_BYTES = 10.0
LOSS_EAGER_BYTES = 14.0
#: Whole-tensor kernels of each chain (the per-row ``+ eps`` and ``rsqrt`` are not counted).
RMSNORM_KERNELS = 6
ROPE_KERNELS = 3
SWIGLU_KERNELS = 2
LOSS_KERNELS = 2
#: Launch cost per kernel, seconds: 260 us / 80 kernels (CUDA.jl "CUDA graphs" documentation).
KERNEL_LAUNCH_S = 260e-6 / 80


def eager_operator(acc: AcceleratorSpec, name: str, nbytes: float, kernels: int,
                   backward_factor: float = ELEMENTWISE_BACKWARD_BYTES_FACTOR) -> OperatorTime:
    """A chain of ``kernels`` eager element-wise kernels moving ``nbytes`` forward in all.

    Each pass takes its bytes at the memory-bound rate, and never less than one launch per kernel
    (the backward runs about as many kernels as the forward).
    """
    floor = kernels * KERNEL_LAUNCH_S
    forward = max(memory_bound_time_s(acc, nbytes), floor)
    backward = max(backward_factor * memory_bound_time_s(acc, nbytes), floor)
    return OperatorTime(name, "memory", 0.0, nbytes, forward, backward, 0.0)


def rmsnorm(acc: AcceleratorSpec, name: str, elements: float) -> OperatorTime:
    """torchtitan's eager ``RMSNorm`` over ``elements`` activations."""
    return eager_operator(acc, name, RMSNORM_EAGER_BYTES * elements, RMSNORM_KERNELS)


def rope(acc: AcceleratorSpec, elements: float) -> OperatorTime:
    """``apply_rotary_emb`` on ``elements`` query plus key values (backward: the same chain)."""
    return eager_operator(acc, "rope", ROPE_EAGER_BYTES * elements, ROPE_KERNELS, 1.0)


def swiglu(acc: AcceleratorSpec, elements: float) -> OperatorTime:
    """``silu(w1 x) * w3 x`` over ``elements`` FFN activations."""
    return eager_operator(acc, "activation", SWIGLU_EAGER_BYTES * elements, SWIGLU_KERNELS)


def repeat_kv(acc: AcceleratorSpec, kv_elements: float, q_elements: float,
              size: float) -> OperatorTime | None:
    """The K and V copies at query width of grouped-query attention (None without groups)."""
    if q_elements <= kv_elements:
        return None
    nbytes = 2 * (kv_elements + q_elements) * size  # K and V: read the heads, write the copy
    return eager_operator(acc, "repeat_kv", nbytes, 2)


def output_copy(acc: AcceleratorSpec, elements: float, size: float) -> OperatorTime:
    """``transpose(1, 2).contiguous()`` of the attention output."""
    return eager_operator(acc, "attn_out_copy", 2 * elements * size, 1)


def loss(acc: AcceleratorSpec, logits: float) -> OperatorTime:
    """``cross_entropy(logits.float())`` over ``logits`` values."""
    return eager_operator(acc, "cross_entropy", LOSS_EAGER_BYTES * logits, LOSS_KERNELS)
