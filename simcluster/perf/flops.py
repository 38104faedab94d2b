"""FLOPs of a decoder-only transformer: per layer, per iteration, and as published.

The engine's compute durations and the MFU/HFU numerators come from here. Only matrix multiplies
are counted (2 FLOPs per multiply-add); biases, norms, softmax and other elementwise work are left
out, as in every published convention (Narayanan et al. SC'21, arXiv 2104.04473, Eq. 3 excludes
them; so does Korthikanti et al. 2022, arXiv 2205.05198). Attention is *not* halved for causal
masking by default, again as those conventions do (both count the full ``s x s`` score matrix);
``causal=True`` halves the score and AV matmuls for a kernel that skips the masked half.

Model FLOPs (MFU numerator) are forward + backward = 3x forward of every layer and the logits.
Hardware FLOPs (HFU numerator) add the recomputed forward: all of each layer for ``full``
recompute, the attention core (scores and AV) for ``selective``; the logits are never recomputed.
The published closed forms at the end are kept as validation oracles.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.params import mla_projection_weights, shared_ffn_hidden
from simcluster.spec.model import ModelSpec

#: Backward costs twice the forward (input gradient + weight gradient), so a training pass is 3x.
TRAIN_PASSES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerFlops:
    """Forward FLOPs of one transformer layer for one micro-batch, by matrix multiply.

    Attributes
    ----------
    qkv_flops : float
        Query ``h x h`` and key/value ``h x kv_heads*head_dim`` projections.
    attention_scores_flops : float
        ``Q K^T`` over the whole sequence (``2*b*s^2*h``; halved when causal).
    attention_values_flops : float
        Attention probabilities times values (``2*b*s^2*h``; halved when causal).
    attention_output_flops : float
        Output projection ``h x h``.
    mlp_flops : float
        FFN matrices of the ``top_k`` active experts (all of a dense MLP) plus the MoE router.
    """

    qkv_flops: float
    attention_scores_flops: float
    attention_values_flops: float
    attention_output_flops: float
    mlp_flops: float

    @property
    def attention_core_flops(self) -> float:
        """Scores plus AV: the part selective recompute repeats (Korthikanti et al. 2022 s4.2)."""
        return self.attention_scores_flops + self.attention_values_flops

    @property
    def total_flops(self) -> float:
        """All matrix-multiply FLOPs of the layer's forward pass."""
        return (self.qkv_flops + self.attention_core_flops + self.attention_output_flops
                + self.mlp_flops)


def layer_forward_flops(model: ModelSpec, micro_batch: int, seq_len: int | None = None,
                        *, causal: bool = False) -> LayerFlops:
    """Forward FLOPs of one layer for ``micro_batch`` sequences of ``seq_len`` tokens.

    Dense MHA with ``ffn = 4h`` gives ``24*b*s*h^2 + 4*b*s^2*h`` (the per-layer forward term of
    Narayanan et al. SC'21, arXiv 2104.04473, Eq. 3).

    Parameters
    ----------
    model : ModelSpec
        Layer shape (GQA via ``kv_heads``, ``ffn_act``, ``moe``).
    micro_batch : int
        Sequences ``b``.
    seq_len : int, optional
        Tokens per sequence ``s``; ``model.seq_len`` when omitted.
    causal : bool
        Halve the score and AV matmuls (default False, as the published conventions).

    Returns
    -------
    LayerFlops
        FLOPs by matrix multiply.
    """
    s = model.seq_len if seq_len is None else seq_len
    tokens = micro_batch * s
    h = model.hidden
    q = model.heads * model.head_dim
    v = model.heads * (model.mla.v_head_dim if model.mla else model.head_dim)
    core_factor = (0.5 if causal else 1.0) * window_share(model, s)
    return LayerFlops(
        qkv_flops=2 * tokens * _qkv_weights(model),  # Q: h x q; K, V: h x kv each (or MLA's)
        attention_scores_flops=core_factor * 2 * tokens * s * q,  # Q K^T: s x s per head
        attention_values_flops=core_factor * 2 * tokens * s * v,  # probabilities x V
        attention_output_flops=2 * tokens * v * h,  # output projection v x h
        mlp_flops=mlp_forward_flops(model, tokens),
    )


def window_pairs(seq: float, window: int) -> float:
    """Query-key pairs per head of causal sliding-window attention over ``seq`` tokens: query ``i``
    attends to ``min(i + 1, window)`` keys, ``seq w - w (w - 1) / 2`` for ``seq >= w`` (Beltagy et
    al. arXiv 2004.05150, Longformer's local attention; Mistral 7B, arXiv 2310.06825)."""
    w = min(float(window), seq)
    return seq * w - w * (w - 1) / 2


def window_share(model: ModelSpec, seq: int) -> float:
    """Attention-core FLOPs of the mean block over a full-attention block's, in either convention
    (the causal half or the full square): a sliding-window block computes the causal band,
    ``2 x pairs / s^2`` of the square (:func:`window_pairs`), on ``window_layers`` of the
    blocks."""
    if not model.window or model.window >= seq:
        return 1.0
    band = 2 * window_pairs(seq, model.window) / (seq * seq)
    return 1.0 - model.window_layers + model.window_layers * band


def _qkv_weights(model: ModelSpec) -> float:
    """Multiply-adds per token of the Q, K and V projections: ``h x (q + 2 kv)``, or multi-head
    latent attention's down- and up-projections (:func:`simcluster.perf.params.mla_projection_weights`)."""
    if model.mla is not None:
        return mla_projection_weights(model)
    h = model.hidden
    return h * model.heads * model.head_dim + 2 * h * model.kv_heads * model.head_dim


def mlp_forward_flops(model: ModelSpec, tokens: int) -> float:
    """Forward FLOPs of one layer's MLP over ``tokens`` tokens.

    ``2*tokens*h*ffn`` per matrix: gelu has 2 matrices, swiglu 3 (gate, up, down). For MoE every
    token passes through ``top_k`` experts, the shared experts and a ``h x experts`` router (Fedus
    et al. 2022, Switch Transformers s2.1; Megatron ``num_floating_point_operations`` counts the
    top_k and shared experts but not the router); ``moe.dense_layers`` dense blocks are averaged
    in, so ``layers x`` this is the model's total.
    """
    matrices = 3 if model.ffn_act == "swiglu" else 2
    per_width = 2 * tokens * model.hidden * matrices  # per unit of inner size
    moe = model.moe
    if moe is None:
        return float(per_width * model.ffn_hidden)
    router = 2 * tokens * model.hidden * moe.experts  # gating logits
    sparse = per_width * (moe.top_k * model.ffn_hidden + shared_ffn_hidden(model)) + router
    dense = moe.dense_layers / model.layers  # leading dense blocks, averaged over the layers
    return float((1 - dense) * sparse + dense * per_width * moe.dense_ffn_hidden)


def logits_forward_flops(model: ModelSpec, batch: int, seq_len: int | None = None) -> float:
    """Output layer ``h x V`` over ``batch`` sequences: ``2*b*s*h*V`` (the V term of SC'21 Eq. 3)."""
    s = model.seq_len if seq_len is None else seq_len
    return float(2 * batch * s * model.hidden * model.vocab)


def recompute_forward_flops(layer: LayerFlops, recompute: str) -> float:
    """Forward FLOPs a layer repeats in backward under ``recompute`` (none | selective | full).

    ``full`` repeats the whole layer (SC'21 Eq. 3's 4th pass); ``selective`` repeats the attention
    core only, ``4bs^2h`` per layer (Korthikanti et al. 2022 s4.2); ``none`` repeats nothing.
    """
    if recompute == "full":
        return layer.total_flops
    if recompute == "selective":
        return layer.attention_core_flops
    if recompute == "none":
        return 0.0
    raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")


def model_flops_per_iteration(model: ModelSpec, global_batch: int, *,
                              causal: bool = False) -> float:
    """Model FLOPs of one optimizer step: 3x forward of every layer and the logits, no recompute.

    The MFU numerator. For plain GPT it equals Korthikanti et al.'s model FLOPs
    ``72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))`` (Korthikanti et al. 2022, arXiv 2205.05198).

    Parameters
    ----------
    model : ModelSpec
        The model.
    global_batch : int
        Sequences per step ``B``.
    causal : bool
        Halve attention-core FLOPs (default False).

    Returns
    -------
    float
        FLOPs per iteration.
    """
    layer = layer_forward_flops(model, global_batch, causal=causal)
    forward = model.layers * layer.total_flops + logits_forward_flops(model, global_batch)
    return TRAIN_PASSES * forward


def hardware_flops_per_iteration(model: ModelSpec, global_batch: int, recompute: str, *,
                                 causal: bool = False) -> float:
    """Hardware FLOPs of one step: model FLOPs plus the recomputed forward of every layer.

    The HFU numerator. With ``full`` recompute and plain GPT it equals Narayanan et al. SC'21 Eq. 3
    exactly.

    Parameters
    ----------
    model : ModelSpec
        The model.
    global_batch : int
        Sequences per step ``B``.
    recompute : str
        ``none``, ``selective`` or ``full``.
    causal : bool
        Halve attention-core FLOPs (default False).

    Returns
    -------
    float
        FLOPs per iteration.
    """
    layer = layer_forward_flops(model, global_batch, causal=causal)
    extra = model.layers * recompute_forward_flops(layer, recompute)
    return model_flops_per_iteration(model, global_batch, causal=causal) + extra


# Published conventions, kept verbatim for validation ------------------------------------------


def sc21_eq3_flops(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. SC'21 (arXiv 2104.04473) Eq. 3: FLOPs per iteration with full recompute.

    ``F = 96*B*s*l*h^2 * (1 + s/(6h) + V/(16*l*h))``: 4 passes over the layer GEMMs (forward,
    recompute, 2x backward), 3 over the logits; plain GPT (MHA, ffn = 4h), no elementwise ops.
    """
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    return (96 * B * s * L * h**2  # 4 passes x 24*B*s*h^2 GEMMs per layer
            * (1
               + s / (6 * h)  # attention scores and AV, 4*B*s^2*h per layer
               + V / (16 * L * h)))  # logits, 3 passes x 2*B*s*h*V


def megatron_flops(model: ModelSpec, global_batch: int) -> float:
    """Megatron-LM ``training.py::num_floating_point_operations``.

    As in ``megatron/training/training.py`` of the Megatron-LM fork
    sail-sg/zero-bubble-pipeline-parallelism @39f2c18:
    ``12*B*s*l*h^2 * [(1 + kv/heads + s/h)*(q/h) + (ffn/h)*top_k*(3/2 if swiglu) + V/(2*l*h)]``:
    forward + backward, no recompute, MoE router not counted.
    """
    B, s, L, h, V = global_batch, model.seq_len, model.layers, model.hidden, model.vocab
    q_ratio = model.heads * model.head_dim / h
    top_k = model.moe.top_k if model.moe else 1
    gated = 1.5 if model.ffn_act == "swiglu" else 1.0
    return (12 * B * s * L * h**2
            * ((1 + model.kv_heads / model.heads + s / h) * q_ratio  # QKV + O, scores + AV
               + (model.ffn_hidden / h) * top_k * gated  # MLP of the routed experts
               + V / (2 * L * h)))  # logits


def korthikanti_model_flops(batch: int, seq_len: int, layers: int, hidden: int,
                            vocab: int) -> float:
    """Korthikanti et al. 2022 (arXiv 2205.05198) App. A model FLOPs, no recompute.

    ``72*B*s*l*h^2 * (1 + s/(6h) + V/(12*l*h))``; plain GPT.
    """
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    return (72 * B * s * L * h**2  # 3 passes x 24*B*s*h^2
            * (1
               + s / (6 * h)  # attention core, 3 passes x 4*B*s^2*h
               + V / (12 * L * h)))  # logits, 3 passes x 2*B*s*h*V


def korthikanti_selective_hardware_flops(batch: int, seq_len: int, layers: int, hidden: int,
                                         vocab: int) -> float:
    """Korthikanti et al. 2022 (arXiv 2205.05198) App. A hardware FLOPs, selective recompute.

    ``72*B*s*l*h^2 * (1 + s/(3h) + V/(12*l*h))``. Its recompute term ``12*B*s^2*h`` per layer is
    three times the attention-core forward ``4*B*s^2*h`` that :func:`hardware_flops_per_iteration`
    adds (it counts the one recomputed forward, not three).
    """
    B, s, L, h, V = batch, seq_len, layers, hidden, vocab
    return (72 * B * s * L * h**2  # 3 passes x 24*B*s*h^2
            * (1
               + s / (3 * h)  # attention core, doubled for recompute as the paper states it
               + V / (12 * L * h)))  # logits


def six_n_flops(params: float, tokens: float) -> float:
    """Kaplan et al. 2020 (arXiv 2001.08361) s2.1: ``6*N`` FLOPs per token for training.

    ``2N`` forward plus ``4N`` backward, attention over the context left out.
    """
    return 6 * params * tokens
