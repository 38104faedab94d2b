"""Parameter counts of a decoder-only transformer.

Counts every weight and bias of the architecture the :class:`ModelSpec` describes. For GPT-style
models (biases, LayerNorm, learned positions, tied embeddings) this is exactly the count of
Narayanan et al. SC'21 (arXiv 2104.04473) section 5.1:
``P = 12*l*h^2 * (1 + 13/(12*h) + (V + s)/(12*l*h))``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.spec.model import ModelSpec


@dataclass(frozen=True, slots=True)
class ParamCount:
    """Parameters by part; ``total`` counts MoE experts once each, ``active`` only top_k of them."""

    embedding: int
    per_layer_attention: int
    per_layer_mlp: int
    per_layer_mlp_active: int
    per_layer_norm: int
    final: int
    layers: int

    @property
    def per_layer(self) -> int:
        """All parameters of one transformer block."""
        return self.per_layer_attention + self.per_layer_mlp + self.per_layer_norm

    @property
    def total(self) -> int:
        """Every parameter of the model."""
        return self.embedding + self.layers * self.per_layer + self.final

    @property
    def active(self) -> int:
        """Parameters a token passes through (MoE: ``top_k`` experts of the layer)."""
        per_layer = self.per_layer_attention + self.per_layer_mlp_active + self.per_layer_norm
        return self.embedding + self.layers * per_layer + self.final


def attention_params(m: ModelSpec) -> int:
    """Q and O projections ``h x heads*head_dim`` each (``h x h`` where ``head_dim = h/heads``),
    K and V ``h x kv_heads*head_dim`` each, plus biases (Q, K, V on their outputs, O on ``h``)."""
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    weights = 2 * m.hidden * q + 2 * m.hidden * kv
    biases = (q + m.hidden + 2 * kv) if m.bias else 0
    return weights + biases


def mlp_params(m: ModelSpec) -> int:
    """One dense FFN: gelu has 2 matrices ``h x f``, swiglu 3; biases on each output."""
    matrices = 3 if m.ffn_act == "swiglu" else 2
    biases = ((matrices - 1) * m.ffn_hidden + m.hidden) if m.bias else 0
    return matrices * m.hidden * m.ffn_hidden + biases


def norm_params(m: ModelSpec) -> int:
    """One normalisation layer: LayerNorm has weight and bias, RMSNorm only a weight."""
    return (2 if m.norm == "layernorm" else 1) * m.hidden


def count_params(m: ModelSpec) -> ParamCount:
    """Parameters of ``m`` by part.

    Per layer: attention + MLP (``experts`` copies plus a ``h x experts`` router for MoE) + two
    norms. Embedding: ``V*h`` (+ ``s*h`` for learned positions). Final: a norm, plus the output
    layer ``V*h`` unless tied to the embedding.
    """
    mlp = mlp_params(m)
    experts, top_k = (m.moe.experts, m.moe.top_k) if m.moe else (1, 1)
    router = m.hidden * experts if m.moe else 0
    embedding = m.vocab * m.hidden + (m.seq_len * m.hidden if m.position == "learned" else 0)
    final = norm_params(m) + (0 if m.tied_embeddings else m.vocab * m.hidden)
    return ParamCount(
        embedding=embedding,
        per_layer_attention=attention_params(m),
        per_layer_mlp=experts * mlp + router,
        per_layer_mlp_active=top_k * mlp + router,
        per_layer_norm=2 * norm_params(m),
        final=final,
        layers=m.layers,
    )
