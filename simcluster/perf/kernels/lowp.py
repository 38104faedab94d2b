"""Low-precision training as Transformer Engine runs it: FP8 (per-tensor or blockwise scaled),
MXFP8 and NVFP4 linear layers.

``precision: fp8 | mxfp8 | nvfp4`` names the input format of the linear layers' GEMMs; everything
else of the layer stays in bf16: the activations between kernels, the norms, the attention (TE's
fused attention runs in bf16 unless FP8 attention is asked for), the output layer and the loss
(Megatron's output layer is not a TE module), the router, and the optimizer with its fp32 master
weights. Per TE linear layer and micro-batch (NVIDIA Transformer Engine documentation, "Using FP8
with Transformer Engine" and the ``Recipe`` classes: ``DelayedScaling``,
``Float8CurrentScaling``, ``Float8BlockScaling``, ``MXFP8BlockScaling``, ``NVFP4BlockScaling``):

- the three GEMMs (forward, data gradient, weight gradient) run at the tensor cores'
  low-precision rate (E4M3 forward, E5M2 gradients under the HYBRID format; per-block scales
  for MXFP8 (32 elements, Open Compute Project MX specification v1.0) and NVFP4 (16 elements
  with an FP8 E4M3 scale, NVIDIA "Pretraining Large Language Models with NVFP4",
  arXiv 2509.25149));
- the GEMM inputs are quantized: the layer input (forward) and the output gradient (backward),
  each read in bf16 and written twice in the low-precision format, once per direction (the
  weight gradient needs the transposed copy: ``cast_transpose`` on Hopper, a second
  block-scaled copy along the other axis for MXFP8 and NVFP4). A norm or activation kernel in
  front of the layer writes the quantized copies itself (TE's ``LayerNormLinear`` and
  ``LayerNormMLP`` fuse the cast), so only the attention output and the gradients coming back
  from a residual or from the attention pay a separate cast kernel; the MLP's inner gradient
  is cast by the activation's backward kernel (``dgelu``/``dswiglu`` + ``cast_transpose``);
- current (tensorwise) scaling reads each quantized tensor once more first, for its amax
  (delayed scaling takes the scale from the amax history of earlier steps; block scaling
  computes its scales inside the cast kernel);
- the weights' quantized copies are made once per step and kept across the micro-batches
  (TE's ``is_first_microbatch`` caching, Megatron-Core passes it) unless ZeRO-3 regathers the
  weights for every pass, then once per gathered pass.

What is saved for the backward shrinks with it: a linear layer keeps its input's quantized
column-wise copy instead of the bf16 tensor (:func:`saved_input_bytes`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from simcluster.perf.kernels.elementwise import memory_operator
from simcluster.perf.kernels.gemm import gemm_operator
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.spec.hardware import LOW_PRECISION, AcceleratorSpec

#: Bytes per element of a quantized copy, scales included: FP8 one byte (per-tensor scale);
#: blockwise FP8 one byte plus an fp32 scale per 128 elements (DeepSeek-V3's 1x128 tiles, TE
#: ``Float8BlockScaling``); MXFP8 one byte plus an E8M0 scale per 32; NVFP4 half a byte plus an
#: E4M3 scale per 16 (per-tensor fp32 scale negligible).
QUANTIZED_BYTES: Final[dict[str, float]] = {
    "fp8": 1.0, "blockwise": 1.0 + 4.0 / 128, "mxfp8": 1.0 + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}
#: Per-tensor scaled FP8 on Hopper: Transformer Engine runs the data- and weight-gradient GEMMs
#: with cuBLAS's split accumulator (``use_split_accumulator``: partial sums promoted to fp32
#: every few MMAs; only the forward GEMM uses fast accumulation), which costs 1.1x to 1.2x
#: against the fast-accumulation rate a GEMM sweep measures (pytorch/ao#2377, torchao's float8
#: makes the same split); 1.15, the middle. Block-scaled formats on Blackwell have no such mode
#: (NVIDIA/TransformerEngine#2748: "there is no fastAccuMode for sm100"), and blockwise FP8
#: promotes inside its own kernel, whose sweep is its rate.
SPLIT_ACCUMULATOR_SLOWDOWN: Final[dict[str, float]] = {"hopper": 1.15}
#: Recipes whose backward GEMMs take the split accumulator where the architecture has one.
SPLIT_ACCUMULATOR_RECIPES: Final = ("delayed", "current")
#: Bytes of the 16-bit activations and gradients the casts read.
HIGH_BYTES: Final = 2.0


def activation_dtype(precision: str) -> str:
    """The dtype of activations, attention and element-wise kernels: bf16 under a low-precision
    format, else the precision itself."""
    return "bf16" if precision in LOW_PRECISION else precision


def gemm_dtype(precision: str) -> str:
    """The tensor-core peak the linear layers' GEMMs run at (``peak_TFLOPS`` key)."""
    return LOW_PRECISION.get(precision, precision)


def recipe_of(precision: str, fp8_recipe: str) -> str:
    """The scaling recipe: ``delayed``, ``current`` or ``blockwise`` for fp8, the format itself
    for mxfp8 and nvfp4, ``none`` for 16/32-bit training."""
    if precision == "fp8":
        return "delayed" if fp8_recipe == "auto" else fp8_recipe
    return precision if precision in LOW_PRECISION else "none"


def backward_slowdown(acc: AcceleratorSpec, recipe: str) -> float:
    """Time factor of the backward GEMMs under ``recipe`` on ``acc``
    (:data:`SPLIT_ACCUMULATOR_SLOWDOWN`; 1.0 where none applies)."""
    if recipe not in SPLIT_ACCUMULATOR_RECIPES:
        return 1.0
    return SPLIT_ACCUMULATOR_SLOWDOWN.get(acc.arch, 1.0)


def quantized_bytes(recipe: str) -> float:
    """Bytes per element of one quantized copy under ``recipe`` (scales included)."""
    return QUANTIZED_BYTES["fp8" if recipe in ("delayed", "current") else recipe]


def saved_input_bytes(precision: str, recipe: str) -> float:
    """Bytes per element a linear layer saves of its input for the weight gradient: the
    quantized column-wise copy under a low-precision format, else 2 (the 16-bit input)."""
    return quantized_bytes(recipe) if precision in LOW_PRECISION else HIGH_BYTES


def cast_bytes(recipe: str, elements: float, fused: bool) -> float:
    """HBM bytes of quantizing ``elements`` 16-bit values into both copies (row- and
    column-wise). ``fused``: a norm or activation kernel writes the copies instead of its bf16
    output (only the difference counts); current scaling first reads the tensor for its amax."""
    written = 2.0 * quantized_bytes(recipe) * elements
    total = written - HIGH_BYTES * elements if fused else HIGH_BYTES * elements + written
    if recipe == "current":
        total += HIGH_BYTES * elements
    return max(total, 0.0)


def cast_operator(acc: AcceleratorSpec, recipe: str, name: str, input_elements: float,
                  grad_elements: float, input_fused: bool, grad_fused: bool) -> OperatorTime:
    """The casts of one linear layer: its input in the forward, its output gradient in the
    backward (memory-bound, :func:`cast_bytes`)."""
    forward = memory_operator(acc, f"{name}_cast", cast_bytes(recipe, input_elements,
                                                              input_fused), backward_factor=0.0)
    backward = memory_operator(acc, f"{name}_cast", cast_bytes(recipe, grad_elements, grad_fused),
                               backward_factor=0.0).time_s
    return OperatorTime(forward.name, "memory", 0.0, forward.bytes, forward.time_s, backward, 0.0)


def weight_cast_bytes(recipe: str, params: float) -> float:
    """HBM bytes of quantizing ``params`` bf16 weights into both copies (once per step, or per
    gathered pass under ZeRO-3)."""
    return cast_bytes(recipe, params, fused=False)


def weight_copy_bytes(precision: str, recipe: str) -> float:
    """Bytes per linear-layer parameter of the quantized weight copies a GPU holds (row- and
    column-wise); 0 for 16/32-bit training."""
    return 2.0 * quantized_bytes(recipe) if precision in LOW_PRECISION else 0.0


@dataclass(frozen=True, slots=True)
class LinearFormat:
    """How a layer's linear GEMMs run: the scenario precision, its scaling recipe (``none`` for
    16/32-bit training, :func:`recipe_of`) and ``execution.fp8_cast_fusion``."""

    dtype: str
    recipe: str = "none"
    fused: bool = True


def linear_operators(acc: AcceleratorSpec, lin: LinearFormat, name: str,
                     shape: tuple[float, float, float], batch: float, input_fused: bool,
                     grad_fused: bool) -> list[OperatorTime]:
    """A linear layer ``[m, k] x [k, n]`` (``batch`` of them) under a low-precision format: its
    three GEMMs at the format's tensor-core rate, and the casts of its input (``m x k``) and
    output gradient (``m x n``); ``input_fused``/``grad_fused``: the kernel before writes the
    copies, where ``lin.fused`` (the stack's TE modules) allows it."""
    m, n, k = shape
    gemm = gemm_operator(acc, gemm_dtype(lin.dtype), name, shape, batch)
    slow = backward_slowdown(acc, lin.recipe)
    if slow != 1.0:
        gemm = dataclasses.replace(gemm, backward_s=gemm.backward_s * slow,
                                   wgrad_s=gemm.wgrad_s * slow)
    return [gemm,
            cast_operator(acc, lin.recipe, name, batch * m * k, batch * m * n,
                          input_fused and lin.fused, grad_fused and lin.fused)]
