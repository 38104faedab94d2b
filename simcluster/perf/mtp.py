"""Multi-token prediction (DeepSeek-V3, arXiv 2412.19437 section 2.2) on the last pipeline stage.

Each of the ``model.mtp_layers`` sequential modules predicts one more token ahead: it normalises
the previous depth's hidden state and the embedding of the shifted tokens (two RMSNorms, the
embedding shared with the model), concatenates them and projects ``2h -> h`` (a GEMM), runs one
transformer block (a MoE block for DeepSeek-V3), and computes the logits and the loss with the
model's shared output head. Megatron-Core places the modules with the loss on the last pipeline
stage (Megatron-Bridge ``recipes/deepseek/h100/deepseek_v3.py`` pipeline layouts: ``mtp`` beside
``loss``). Their block's expert-parallel dispatch and TP communication are not added (compute
only); their parameters are held on the last stage (:mod:`.memory_stage`).
"""

from __future__ import annotations

from simcluster.perf.kernels.elementwise import memory_operator
from simcluster.perf.kernels.gemm import gemm_operator
from simcluster.perf.kernels.lowp import activation_dtype
from simcluster.perf.kernels.operator import LayerTimes, bytes_per_element
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec


def with_mtp(logits: LayerTimes, block: LayerTimes, embedding: LayerTimes, model: ModelSpec,
             acc: AcceleratorSpec, dtype: str, tokens: float, tp: int) -> LayerTimes:
    """The last stage's logits and loss, plus ``model.mtp_layers`` modules of ``block``, an
    embedding gather, two norms, the ``2h -> h`` projection (``1/tp`` of its columns) and another
    pass of the output head and loss each; ``tokens``: the micro-batch's tokens on this GPU."""
    if not model.mtp_layers:
        return logits
    act = activation_dtype(dtype)
    size = bytes_per_element(act)
    h = model.hidden
    extras = [memory_operator(acc, "mtp_norms", 2 * 2 * tokens * h * size),
              gemm_operator(acc, act, "mtp_proj", (tokens, h / tp, 2 * h))]
    parts = [block, embedding, logits]
    n = model.mtp_layers
    forward = logits.forward_s + n * (sum(p.forward_s for p in parts) + sum(o.time_s for o in extras))
    backward = logits.backward_s + n * (sum(p.backward_s for p in parts)
                                        + sum(o.backward_s for o in extras))
    wgrad = logits.wgrad_s + n * (sum(p.wgrad_s for p in parts) + sum(o.wgrad_s for o in extras))
    return LayerTimes(forward_s=forward, backward_s=backward + n * block.recompute_s,
                      wgrad_s=wgrad, recompute_s=logits.recompute_s,
                      operators=(*logits.operators, *extras))
