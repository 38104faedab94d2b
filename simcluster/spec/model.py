"""Model specification: the shape of a dense or mixture-of-experts decoder-only transformer.

Values come from a catalog preset (``simcluster/catalog/models.yaml``), a mapping, or a preset with
overrides. Defaults that follow from other keys (``kv_heads = heads``, ``ffn_hidden = 4*hidden``) are
filled in here, so the resolved spec is complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.errors import SpecError
from simcluster.spec.schema import Context, spec_field

FFN_ACTS = ("gelu", "swiglu")
POSITIONS = ("learned", "rope", "alibi")
NORMS = ("layernorm", "rmsnorm")

# Model dimensions have upper limits far above any real model, so that a typo (vocab 5e13, hidden
# 8e43) is refused instead of allocating or looping by its size.
#: Transformer blocks: real models have at most ~130 (Llama 3 405B: 126).
MAX_LAYERS = 10_000
#: Hidden size (and heads): real models have at most ~2**14-2**15 (Llama 3 405B: 16384).
MAX_HIDDEN = 2**20
#: FFN inner size: real models have at most ~2**16-2**17 (Llama 3 405B: 53248).
MAX_FFN_HIDDEN = 2**22
#: Vocabulary: real models have at most ~2**18 (Gemma: 256k).
MAX_VOCAB = 2**24
#: Sequence length: the longest trained contexts are ~2**20-2**23 tokens.
MAX_SEQ_LEN = 2**24
#: Experts per MoE layer: real models have at most a few hundred (DeepSeek-V3: 256).
MAX_EXPERTS = 2**16


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """Mixture of experts: ``experts`` FFNs per layer, ``top_k`` of them active per token."""

    experts: int = spec_field(ge=1, le=MAX_EXPERTS)
    top_k: int = spec_field(ge=1, le=MAX_EXPERTS)

    def __post_init__(self) -> None:
        if self.top_k > self.experts:
            raise SpecError("top_k", f"{self.top_k} exceeds experts={self.experts}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer.

    Attributes
    ----------
    layers, hidden, heads : int
        Transformer blocks, hidden size h, attention (query) heads.
    kv_heads : int
        Key/value heads (grouped-query attention); equals ``heads`` for multi-head attention.
    head_dim : int
        Size of one attention head; ``hidden / heads`` unless given (0 in the file).
    ffn_hidden : int
        FFN inner size (per expert for MoE); ``4*hidden`` by default.
    ffn_act : str
        ``gelu`` (2 weight matrices) or ``swiglu`` (3 weight matrices).
    vocab, seq_len : int
        Vocabulary size and training sequence length in tokens.
    bias, dropout, position, norm
        Linear-layer biases, dropout kernels in training, position embedding (``learned`` adds
        ``seq_len*hidden`` weights) and
        normalisation (``layernorm`` has a weight and a bias, ``rmsnorm`` a weight only).
    """

    name: str = spec_field("custom")
    layers: int = spec_field(ge=1, le=MAX_LAYERS)
    hidden: int = spec_field(ge=1, le=MAX_HIDDEN)
    heads: int = spec_field(ge=1, le=MAX_HIDDEN)
    kv_heads: int = spec_field(ge=1, le=MAX_HIDDEN, derived=True)
    head_dim: int = spec_field(
        0, ge=0, le=MAX_HIDDEN, doc="size of one attention head; 0: hidden / heads. Set it where "
        "the heads are wider or narrower than hidden / heads (Qwen3: 128 with hidden 2048 and 32 "
        "heads; GPT-OSS: 64): the Q and output projections are hidden x heads*head_dim")
    ffn_hidden: int = spec_field(ge=1, le=MAX_FFN_HIDDEN, derived=True)
    ffn_act: str = spec_field("gelu", choices=FFN_ACTS)
    vocab: int = spec_field(ge=1, le=MAX_VOCAB)
    seq_len: int = spec_field(ge=1, le=MAX_SEQ_LEN)
    tied_embeddings: bool = spec_field(False)
    bias: bool = spec_field(True, doc="linear layers carry biases (GPT, BLOOM) or not (Llama)")
    dropout: bool | None = spec_field(
        None, doc="dropout runs in training (embedding, attention probabilities, "
        "residual branches: GPT-2/3, BLOOM); false: no dropout kernels (Llama; MPT with p = 0, "
        "where PyTorch skips the op); default: as bias")
    position: str = spec_field("learned", choices=POSITIONS)
    norm: str = spec_field("layernorm", choices=NORMS)
    moe: MoESpec | None = spec_field(None)

    @staticmethod
    def derive(values: dict[str, Any], context: Context) -> None:
        """``kv_heads`` defaults to ``heads``; ``ffn_hidden`` to ``4*hidden``."""
        if "kv_heads" not in values and "heads" in values:
            values["kv_heads"] = values["heads"]
        if "ffn_hidden" not in values and "hidden" in values:
            values["ffn_hidden"] = 4 * values["hidden"]

    def __post_init__(self) -> None:
        if self.dropout is None:  # as bias: the models with biases are trained with dropout
            object.__setattr__(self, "dropout", self.bias)
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise SpecError("hidden", f"{self.hidden} is not divisible by heads={self.heads}: "
                                "give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise SpecError("kv_heads", f"{self.kv_heads} must divide heads={self.heads}")

