"""Transformer layers, forward and forward+backward, in eager PyTorch bf16: time per layer and the
activation memory a layer keeps for its backward.

Two layer kinds: GPT/MPT (LayerNorm, fused QKV without biases, causal attention, GELU MLP of 4h)
and Llama (RMSNorm, rotary embedding in the rotate-half form, grouped-query attention with K/V
repeated to the query heads as torchtitan's repeat_kv did, SwiGLU MLP). Parameters are bf16 (no
autocast, no fp32 master copy: what the GPU computes per layer, not the optimizer). A stack of
``layers`` identical layers is timed and divided, which keeps launch gaps between layers in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # "gpt" or "llama"
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    seq: int
    batch: int
    layers: int


SHAPES = [
    Shape("mpt-1b", "gpt", 2048, 16, 16, 8192, 2048, 8, 4),
    Shape("mpt-7b", "gpt", 4096, 32, 32, 16384, 2048, 4, 4),
    Shape("mpt-13b", "gpt", 5120, 40, 40, 20480, 2048, 2, 4),
    Shape("mpt-30b", "gpt", 7168, 64, 64, 28672, 2048, 2, 2),
    Shape("mpt-70b", "gpt", 8192, 64, 64, 32768, 2048, 1, 2),
    Shape("mpt-7b-8k", "gpt", 4096, 32, 32, 16384, 8192, 1, 4),
    Shape("mpt-7b-32k", "gpt", 4096, 32, 32, 16384, 32768, 1, 2),
    Shape("llama3-8b", "llama", 4096, 32, 8, 14336, 8192, 1, 4),
    Shape("llama2-7b", "llama", 4096, 32, 32, 11008, 4096, 2, 4),
    Shape("llama3-70b", "llama", 8192, 64, 8, 28672, 4096, 1, 2),
]


class Layer(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.s = s
        hd = s.hidden // s.heads
        self.norm1 = nn.LayerNorm(s.hidden) if s.kind == "gpt" else nn.RMSNorm(s.hidden)
        self.norm2 = nn.LayerNorm(s.hidden) if s.kind == "gpt" else nn.RMSNorm(s.hidden)
        self.qkv = nn.Linear(s.hidden, (s.heads + 2 * s.kv_heads) * hd, bias=False)
        self.out = nn.Linear(s.hidden, s.hidden, bias=False)
        up = 2 * s.ffn if s.kind == "llama" else s.ffn
        self.fc1 = nn.Linear(s.hidden, up, bias=False)
        self.fc2 = nn.Linear(s.ffn, s.hidden, bias=False)
        pos = torch.arange(s.seq, dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        ang = torch.outer(pos, inv).repeat(1, 2)
        self.register_buffer("cos", ang.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", ang.sin()[None, :, None, :], persistent=False)
        self.backend = SDPBackend.FLASH_ATTENTION

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * self.cos + rot * self.sin

    def _attn(self, x: torch.Tensor) -> torch.Tensor:
        s = self.s
        b, t, _ = x.shape
        hd = s.hidden // s.heads
        q, k, v = self.qkv(x).split([s.heads * hd, s.kv_heads * hd, s.kv_heads * hd], dim=-1)
        q, k, v = (y.view(b, t, -1, hd) for y in (q, k, v))
        if s.kind == "llama":
            q, k = self._rope(q), self._rope(k)
            rep = s.heads // s.kv_heads
            if rep > 1:
                k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        with sdpa_kernel([self.backend]):
            o = nnf.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
        return self.out(o.transpose(1, 2).reshape(b, t, s.hidden))

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        if self.s.kind == "llama":
            gate, up = self.fc1(x).chunk(2, dim=-1)
            return self.fc2(nnf.silu(gate) * up)
        return self.fc2(nnf.gelu(self.fc1(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._attn(self.norm1(x))
        return x + self._mlp(self.norm2(x))


def _flops(s: Shape) -> float:
    """Model FLOPs of one layer's forward: GEMMs 2 x tokens x weights, attention 4 b s^2 h / 2."""
    hd = s.hidden // s.heads
    tokens = s.batch * s.seq
    up = 2 * s.ffn if s.kind == "llama" else s.ffn
    weights = s.hidden * (s.heads + 2 * s.kv_heads) * hd + s.hidden**2 + s.hidden * up + s.ffn * s.hidden
    return 2.0 * tokens * weights + 4.0 * s.batch * s.seq**2 * s.hidden / 2


def run_layers(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "layers.csv")
    for shape in SHAPES:
        try:
            with torch.device("cuda"):
                stack = nn.Sequential(*(Layer(shape) for _ in range(shape.layers))).to(torch.bfloat16)
        except Exception as exc:
            log(out, f"layer {shape.name}: {exc!r}"[:300])
            continue
        for name, backend in BACKENDS.items():
            if time.time() > deadline:
                log(out, "layers: deadline reached, rest skipped")
                return
            try:
                _measure(table, sampler, shape, stack, name, backend)
            except Exception as exc:
                log(out, f"layer {shape.name} {name}: {exc!r}"[:300])
        del stack
        torch.cuda.empty_cache()


def _measure(table: Table, sampler: Sampler, s: Shape, stack: nn.Sequential, name: str,
             backend: SDPBackend) -> None:
    for layer in stack:
        layer.backend = backend  # type: ignore[assignment]
    x = torch.randn(s.batch, s.seq, s.hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def fwd() -> object:
        with torch.no_grad():
            return stack(x)

    def fwd_bwd() -> object:
        stack.zero_grad(set_to_none=True)  # each call a first micro-batch: no accumulation
        x.grad = None
        stack(x).backward(grad)
        return None

    t0 = time.time()
    f, _, _ = time_cuda(fwd, min_ms=60.0, max_reps=20, warmup=2)
    fb, _, _ = time_cuda(fwd_bwd, min_ms=100.0, max_reps=20, warmup=2)
    clk = sampler.window(t0, time.time())
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = stack(x)
    saved = torch.cuda.memory_allocated() - before - y.numel() * y.element_size()
    del y
    flops = _flops(s)
    table.add({"shape": s.name, "kind": s.kind, "attention": name, "hidden": s.hidden,
               "heads": s.heads, "kv_heads": s.kv_heads, "ffn": s.ffn, "seq": s.seq,
               "batch": s.batch, "layers": s.layers, "fwd_ms_per_layer": f / s.layers,
               "fwd_bwd_ms_per_layer": fb / s.layers,
               "model_tflops_fwd_bwd": 3 * flops / (fb / s.layers) / 1e9,
               "activation_MiB_per_layer": saved / s.layers / 2**20, "sm_MHz": clk["sm_MHz"],
               "power_W": clk["power_W"]})


#: Layers measured again under torch.compile (inductor's fused element-wise kernels), 2 each.
COMPILED = ("mpt-7b", "mpt-13b", "llama3-8b", "llama2-7b")


def run_compiled(out: Path, sampler: Sampler, deadline: float) -> None:
    """The same layers under ``torch.compile`` (default mode; flash attention): forward+backward
    time per layer and the activation bytes the compiled graph keeps (AOTAutograd's partitioner
    recomputes cheap element-wise ops in the backward), as stacks that compile run them."""
    table = Table(out / "layers_compiled.csv")
    for shape in (s for s in SHAPES if s.name in COMPILED):
        if time.time() > deadline:
            log(out, "compiled: deadline reached, rest skipped")
            return
        s = Shape(shape.name, shape.kind, shape.hidden, shape.heads, shape.kv_heads, shape.ffn,
                  shape.seq, shape.batch, 2)
        start = time.time()
        try:
            with torch.device("cuda"):
                stack = nn.Sequential(*(Layer(s) for _ in range(s.layers))).to(torch.bfloat16)
            _measure_compiled(table, sampler, s, stack)
        except Exception as exc:
            log(out, f"compiled {s.name}: {exc!r}"[:300])
        log(out, f"compiled {s.name}: {time.time() - start:.0f} s with compilation")
        torch._dynamo.reset()
        torch.cuda.empty_cache()


def _measure_compiled(table: Table, sampler: Sampler, s: Shape, stack: nn.Sequential) -> None:
    compiled = torch.compile(stack)
    x = torch.randn(s.batch, s.seq, s.hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def fwd_bwd() -> object:
        stack.zero_grad(set_to_none=True)
        x.grad = None
        compiled(x).backward(grad)
        return None

    fwd_bwd()  # compiles
    torch.cuda.synchronize()
    t0 = time.time()
    fb, _, _ = time_cuda(fwd_bwd, min_ms=100.0, max_reps=20, warmup=2)
    clk = sampler.window(t0, time.time())
    stack.zero_grad(set_to_none=True)
    x.grad = None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = compiled(x)
    saved = torch.cuda.memory_allocated() - before - y.numel() * y.element_size()
    del y
    table.add({"shape": s.name, "kind": s.kind, "attention": "sdpa-flash", "mode": "compile",
               "hidden": s.hidden, "heads": s.heads, "kv_heads": s.kv_heads, "ffn": s.ffn,
               "seq": s.seq, "batch": s.batch, "layers": s.layers,
               "fwd_bwd_ms_per_layer": fb / s.layers,
               "model_tflops_fwd_bwd": 3 * _flops(s) / (fb / s.layers) / 1e9,
               "activation_MiB_per_layer": saved / s.layers / 2**20, "sm_MHz": clk["sm_MHz"],
               "power_W": clk["power_W"]})
