"""Parameter counts of a decoder-only transformer.

Counts every weight and bias of the architecture the :class:`ModelSpec` describes. For GPT-style
models (biases, LayerNorm, learned positions, tied embeddings) this is exactly the count of
Narayanan et al. SC'21 (arXiv 2104.04473) section 5.1:
``P = 12*l*h^2 * (1 + 13/(12*h) + (V + s)/(12*l*h))``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.errors import SpecError
from simcluster.spec.model import MLASpec, ModelSpec


@dataclass(frozen=True, slots=True)
class ParamCount:
    """Parameters by part; ``total`` counts MoE experts once each, ``active`` only top_k of them.

    ``per_layer_mlp`` is one MoE block's FFN (routed experts, shared experts, router) or a dense
    block's; with ``dense_layers`` leading dense blocks (DeepSeek-V3) those have ``dense_mlp``.
    """

    embedding: int
    per_layer_attention: int
    per_layer_mlp: int
    per_layer_mlp_active: int
    per_layer_norm: int
    final: int
    layers: int
    dense_layers: int = 0
    dense_mlp: int = 0
    shared_mlp: int = 0  # the shared experts of one MoE block (in per_layer_mlp)
    router: int = 0  # one MoE block's router (in per_layer_mlp)
    mtp: int = 0  # multi-token prediction modules: not in total (the published convention)

    @property
    def per_layer(self) -> int:
        """All parameters of one (MoE, where there are both) transformer block."""
        return self.per_layer_attention + self.per_layer_mlp + self.per_layer_norm

    @property
    def routed_mlp(self) -> int:
        """The routed experts of one MoE block (all of a dense model's FFN)."""
        return self.per_layer_mlp - self.shared_mlp - self.router

    @property
    def total(self) -> int:
        """Every parameter of the model."""
        return self._sum(self.per_layer_mlp)

    @property
    def active(self) -> int:
        """Parameters a token passes through (MoE: ``top_k`` experts of the layer)."""
        return self._sum(self.per_layer_mlp_active)

    def _sum(self, mlp: int) -> int:
        blocks = self.layers * (self.per_layer_attention + self.per_layer_norm)
        ffns = (self.layers - self.dense_layers) * mlp + self.dense_layers * self.dense_mlp
        return self.embedding + blocks + ffns + self.final


def attention_params(m: ModelSpec) -> int:
    """Q and O projections ``h x heads*head_dim`` each (``h x h`` where ``head_dim = h/heads``),
    K and V ``h x kv_heads*head_dim`` each, plus biases (Q, K, V on their outputs, O on ``h``)
    and a sink logit per head where the model has them; multi-head latent attention:
    :func:`mla_params`."""
    sinks = m.heads if m.attention_sinks else 0  # one learned logit per head (GPT-OSS)
    if m.mla is not None:
        return mla_params(m) + sinks
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    weights = 2 * m.hidden * q + 2 * m.hidden * kv
    biases = (q + m.hidden + 2 * kv) if m.bias else 0
    return weights + biases + sinks


def mla_params(m: ModelSpec) -> int:
    """Multi-head latent attention (DeepSeek-V2 arXiv 2405.04434 section 2.1, the HF
    ``modeling_deepseek.py`` projections): the projections of :func:`mla_projection_weights`, an
    RMSNorm of each latent (``q_lora`` where queries are compressed, ``kv_lora``) and the output
    ``heads*v_head_dim x h``. No biases."""
    a = _mla(m)
    norms = a.q_lora_rank + a.kv_lora_rank
    return mla_projection_weights(m) + norms + m.heads * a.v_head_dim * m.hidden


def mla_projection_weights(m: ModelSpec) -> int:
    """Multi-head latent attention's Q, K and V matrices: queries ``h x q_lora`` and ``q_lora x
    heads*head_dim`` (or one ``h x heads*head_dim``); keys and values ``h x (kv_lora + rope)`` (the
    latent and the shared rotary key) and ``kv_lora x heads*(head_dim - rope + v_head_dim)``."""
    a, h, heads = _mla(m), m.hidden, m.heads
    q = (a.q_lora_rank * (h + heads * m.head_dim) if a.q_lora_rank
         else h * heads * m.head_dim)
    nope = m.head_dim - a.rope_head_dim
    return q + h * (a.kv_lora_rank + a.rope_head_dim) + a.kv_lora_rank * heads * (nope + a.v_head_dim)


def _mla(m: ModelSpec) -> MLASpec:
    if m.mla is None:
        raise SpecError("model.mla", f"{m.name} has no multi-head latent attention to count")
    return m.mla


def mlp_params(m: ModelSpec, ffn_hidden: int | None = None) -> int:
    """One dense FFN of ``ffn_hidden`` (default ``m.ffn_hidden``): gelu has 2 matrices ``h x f``,
    swiglu 3; biases on each output."""
    f = m.ffn_hidden if ffn_hidden is None else ffn_hidden
    matrices = 3 if m.ffn_act == "swiglu" else 2
    biases = ((matrices - 1) * f + m.hidden) if m.bias else 0
    return matrices * m.hidden * f + biases


def shared_ffn_hidden(m: ModelSpec) -> int:
    """Inner size of all of a MoE block's shared experts together (0 without)."""
    if m.moe is None or not m.moe.shared_experts:
        return 0
    return m.moe.shared_experts * (m.moe.shared_ffn_hidden or m.ffn_hidden)


def norm_params(m: ModelSpec) -> int:
    """One normalisation layer: LayerNorm has weight and bias, RMSNorm only a weight."""
    return (2 if m.norm == "layernorm" else 1) * m.hidden


def count_params(m: ModelSpec) -> ParamCount:
    """Parameters of ``m`` by part.

    Per layer: attention + MLP (``experts`` copies, the shared experts and a ``h x experts``
    router for MoE) + two norms; the leading ``moe.dense_layers`` blocks have a dense FFN of
    ``moe.dense_ffn_hidden``. Embedding: ``V*h`` (+ ``s*h`` for learned positions). Final: a
    norm, plus the output layer ``V*h`` unless tied to the embedding.
    """
    mlp = mlp_params(m)
    moe = m.moe
    experts, top_k = (moe.experts, moe.top_k) if moe else (1, 1)
    router = (m.hidden + (1 if m.bias else 0)) * experts if moe else 0  # logits (and biases)
    shared_width = shared_ffn_hidden(m)
    shared = mlp_params(m, shared_width) if shared_width else 0
    embedding = m.vocab * m.hidden + (m.seq_len * m.hidden if m.position == "learned" else 0)
    final = norm_params(m) + (0 if m.tied_embeddings else m.vocab * m.hidden)
    dense_layers = moe.dense_layers if moe else 0
    return ParamCount(
        embedding=embedding,
        per_layer_attention=attention_params(m),
        per_layer_mlp=experts * mlp + shared + router,
        per_layer_mlp_active=top_k * mlp + shared + router,
        per_layer_norm=2 * norm_params(m),
        final=final,
        layers=m.layers,
        dense_layers=dense_layers,
        dense_mlp=mlp_params(m, moe.dense_ffn_hidden) if dense_layers and moe else 0,
        shared_mlp=shared,
        router=router,
        mtp=m.mtp_layers * mtp_module_params(m, experts * mlp + shared + router),
    )


def mtp_module_params(m: ModelSpec, block_mlp: int) -> int:
    """One multi-token prediction module (DeepSeek-V3 section 2.2; the checkpoint's ``enorm``,
    ``hnorm``, ``eh_proj``, ``shared_head.norm`` and one block): a block of ``block_mlp`` FFN
    parameters, the ``2h x h`` projection and three norms; the embedding and the output head are
    the model's (11.6B for DeepSeek-V3, whose README gives 11.5B unique)."""
    block = attention_params(m) + block_mlp + 2 * norm_params(m)
    return block + 2 * m.hidden * m.hidden + 3 * norm_params(m)
