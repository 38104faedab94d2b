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
    """Mixture of experts: ``experts`` FFNs per layer, ``top_k`` of them active per token.

    ``model.ffn_hidden`` is one routed expert's inner size. DeepSeek-style layers add
    ``shared_experts`` that every token passes through (DeepSeekMoE, Dai et al. arXiv 2401.06066),
    and the first ``dense_layers`` blocks keep a dense FFN of ``dense_ffn_hidden`` (DeepSeek-V3's
    ``first_k_dense_replace``). ``imbalance`` is the routed tokens of the busiest expert-parallel
    rank over the mean (1: balanced routing, as the benchmark recipes force it).
    """

    experts: int = spec_field(ge=1, le=MAX_EXPERTS)
    top_k: int = spec_field(ge=1, le=MAX_EXPERTS)
    shared_experts: int = spec_field(
        0, ge=0, le=MAX_EXPERTS, doc="experts every token passes through besides its top_k "
        "(DeepSeek-V3, Kimi-K2: 1); each of shared_ffn_hidden")
    shared_ffn_hidden: int = spec_field(
        0, ge=0, le=MAX_FFN_HIDDEN, doc="inner size of one shared expert; 0: model.ffn_hidden")
    dense_layers: int = spec_field(
        0, ge=0, le=MAX_LAYERS, doc="leading blocks with a dense FFN instead of experts "
        "(DeepSeek-V3: 3, Kimi-K2: 1)")
    dense_ffn_hidden: int = spec_field(
        0, ge=0, le=MAX_FFN_HIDDEN, doc="inner size of the dense blocks' FFN (required with "
        "dense_layers)")
    imbalance: float = spec_field(
        1.0, ge=1.0, le=MAX_EXPERTS, doc="routed tokens of the busiest expert-parallel rank over "
        "the mean: its expert GEMMs and all-to-all run that much longer (1: balanced, as "
        "Megatron-Bridge's benchmark recipes force with moe_router_force_load_balancing)")

    def __post_init__(self) -> None:
        if self.top_k > self.experts:
            raise SpecError("top_k", f"{self.top_k} exceeds experts={self.experts}")
        if self.dense_layers and not self.dense_ffn_hidden:
            raise SpecError("dense_ffn_hidden", f"dense_layers={self.dense_layers} needs the "
                            "dense blocks' FFN inner size (> 0)")


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 section 2.1; DeepSeek-V3).

    Queries go through a ``q_lora_rank`` bottleneck (0: one ``h x heads*head_dim`` projection),
    keys and values through a shared ``kv_lora_rank`` latent; each head's query and key have
    ``model.head_dim`` = a non-rotary part plus ``rope_head_dim`` rotary dimensions (the rotary
    key is one per token, shared by the heads), each value ``v_head_dim``.
    """

    q_lora_rank: int = spec_field(0, ge=0, le=MAX_HIDDEN)
    kv_lora_rank: int = spec_field(ge=1, le=MAX_HIDDEN)
    rope_head_dim: int = spec_field(ge=0, le=MAX_HIDDEN)
    v_head_dim: int = spec_field(ge=1, le=MAX_HIDDEN)


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
    window: int = spec_field(
        0, ge=0, le=MAX_SEQ_LEN, doc="sliding-window attention: each query attends to itself and "
        "the window - 1 tokens before it (Mistral 7B: 4096; GPT-OSS: 128); 0: full attention")
    window_layers: float = spec_field(
        1.0, gt=0.0, le=1.0, doc="share of the blocks whose attention is windowed (GPT-OSS: 0.5, "
        "alternating with full attention); the rest attend to the whole sequence")
    attention_sinks: bool = spec_field(
        False, doc="a learned logit per head in each softmax's denominator (GPT-OSS): its "
        "parameters are counted, its compute is negligible")
    mtp_layers: int = spec_field(
        0, ge=0, le=MAX_LAYERS, doc="multi-token prediction modules trained with the model "
        "(DeepSeek-V3: 1): each adds a block, a 2h x h projection and a pass through the output "
        "head on the last pipeline stage; their parameters are not in the model's total "
        "(DeepSeek-V3's 671B excludes its 14B module)")
    mla: MLASpec | None = spec_field(
        None, doc="multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) instead of the Q, K, V "
        "projections; head_dim is then the query/key head size (non-rotary + rotary)")

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
        if self.mla is not None:
            if self.kv_heads != self.heads:
                raise SpecError("kv_heads", f"{self.kv_heads}: multi-head latent attention has a "
                                f"key and value per head (kv_heads = heads = {self.heads})")
            if self.mla.rope_head_dim >= self.head_dim:
                raise SpecError("mla.rope_head_dim", f"{self.mla.rope_head_dim} must be below "
                                f"head_dim={self.head_dim} (the non-rotary part is the rest)")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise SpecError("moe.dense_layers", f"{self.moe.dense_layers} must be below "
                            f"layers={self.layers} (a model of dense layers only has no moe)")

