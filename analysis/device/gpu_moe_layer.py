"""A whole mixture-of-experts block, forward and forward+backward, by tokens per micro-batch.

The block is what a dropless MoE layer runs on one GPU after dispatch, in eager bf16 autograd:
router GEMM, fp32 softmax, top-k and renormalised weights; a stable sort of the chosen experts
and their counts; the permute of the tokens into expert order, padded per expert to a multiple
of 16 rows into a buffer of static size (no host sync, as torchtitan does it); the grouped up
GEMM ``[t, h] x [h, 2f]`` (``torch._grouped_mm``), SwiGLU, the grouped down GEMM; the weighted
unpermute (``index_add``) back to token order. The ``sync`` variant also copies the expert counts
to the host each forward, as Megatron-Core's all-to-all dispatcher does to size its splits.

Expert parallelism is represented by its per-GPU share: ``local`` experts and top-``k_local`` so
that the tokens per expert equal the full model's (``tokens x k / experts``), e.g. Qwen3-30B-A3B
at EP 8 is 16 local experts at top-1. Time against tokens gives each layer's fixed cost per
micro-batch (intercept) and its cost per token (slope).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda

BF16 = torch.bfloat16
ALIGN = 16
#: name: (hidden, expert FFN width, experts on this GPU, top-k on this GPU, as what)
CONFIGS = {
    "qwen3-30b-a3b/ep1": (2048, 768, 128, 8),
    "qwen3-30b-a3b/ep8": (2048, 768, 16, 1),
    "deepseek-v3/ep8": (7168, 2048, 32, 1),
    "gpt-oss-120b/ep1": (2880, 2880, 128, 4),
    "mixtral-8x7b/ep1": (4096, 14336, 8, 2),
}
TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)


class MoEBlock(torch.nn.Module):
    def __init__(self, h: int, f: int, experts: int, top_k: int, sync: bool) -> None:
        super().__init__()
        init = {"device": "cuda", "dtype": BF16}
        self.router = torch.nn.Parameter(torch.randn(experts, h, **init) * h**-0.5)
        self.up = torch.nn.Parameter(torch.randn(experts, 2 * f, h, **init) * h**-0.5)
        self.down = torch.nn.Parameter(torch.randn(experts, h, f, **init) * f**-0.5)
        self.experts, self.top_k, self.sync = experts, top_k, sync

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(nnf.linear(x, self.router).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(BF16).flatten()
        flat = chosen.flatten()
        order = torch.sort(flat, stable=True).indices
        counts = torch.zeros(self.experts, device=x.device, dtype=torch.int64).scatter_add_(
            0, flat, torch.ones_like(flat))  # torch.bincount would synchronise with the host
        if self.sync:
            counts.cpu()
        padded = (counts + ALIGN - 1) // ALIGN * ALIGN
        start = counts.cumsum(0) - counts
        pad_start = padded.cumsum(0) - padded
        experts_sorted = flat[order]
        slots = torch.arange(flat.numel(), device=x.device) - start[experts_sorted] \
            + pad_start[experts_sorted]
        rows = flat.numel() + self.experts * ALIGN
        tokens = order // self.top_k
        xp = x.new_zeros(rows, x.shape[1]).index_copy(0, slots, x.index_select(0, tokens))
        offs = padded.cumsum(0).to(torch.int32)
        up = torch._grouped_mm(xp, self.up.transpose(-2, -1), offs=offs)
        gate, lin = up.chunk(2, dim=-1)
        down = torch._grouped_mm(nnf.silu(gate) * lin, self.down.transpose(-2, -1), offs=offs)
        routed = down.index_select(0, slots) * weights[order].unsqueeze(-1)
        return torch.zeros_like(x).index_add(0, tokens, routed)


def run_moe_layer(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "moe_layer.csv")
    for name, (h, f, local, k) in CONFIGS.items():
        for sync in (False, True):
            block = MoEBlock(h, f, local, k, sync)
            for tokens in TOKENS:
                if time.time() > deadline:
                    log(out, "moe_layer: deadline reached, rest skipped")
                    return
                if tokens * k * max(h, 2 * f) * 2 * 6 > 24 << 30:
                    continue  # over ~24 GiB of activations: not a micro-batch one GPU runs
                _point(out, table, block, name, h, f, local, k, sync, tokens)
            del block
            torch.cuda.empty_cache()


def _point(out: Path, table: Table, block: MoEBlock, name: str, h: int, f: int, local: int,
           k: int, sync: bool, tokens: int) -> None:
    x = torch.randn(tokens, h, device="cuda", dtype=BF16, requires_grad=True)
    grad = torch.randn(tokens, h, device="cuda", dtype=BF16)

    def forward() -> object:
        with torch.no_grad():
            return block(x)

    def both() -> object:
        block.zero_grad(set_to_none=True)
        x.grad = None
        block(x).backward(grad)
        return None

    try:
        fwd, _, _ = time_cuda(forward, min_ms=30.0, max_reps=40)
        fwd_bwd, _, _ = time_cuda(both, min_ms=30.0, max_reps=40)
        host = _host_ms(both)
        saved = _saved_bytes(block, x)
        kernels = _kernels(both)
    except Exception as exc:
        log(out, f"moe_layer {name} t={tokens} sync={sync}: {exc!r}"[:300])
        return
    gemm_flops = 2.0 * tokens * k * 3 * h * f  # up (2f) and down (f), per routed copy
    table.add({"config": name, "hidden": h, "ffn": f, "local_experts": local, "top_k": k,
               "sync": int(sync), "tokens": tokens, "tokens_per_expert": tokens * k // local,
               "fwd_ms": fwd, "fwd_bwd_ms": fwd_bwd, "host_fwd_bwd_ms": host,
               "saved_MiB": saved / 2**20, "kernels_fwd_bwd": kernels,
               "fwd_gemm_tflops": gemm_flops / fwd / 1e9,
               "fwd_bwd_gemm_tflops": 3 * gemm_flops / fwd_bwd / 1e9})


def _saved_bytes(block: MoEBlock, x: torch.Tensor) -> float:
    """Bytes a forward with autograd keeps for the backward (its output excluded)."""
    block.zero_grad(set_to_none=True)
    x.grad = None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = block(x)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - before - y.numel() * y.element_size()
    del y
    return float(kept)


def _kernels(fn: Callable[[], object]) -> int:
    """GPU kernels and copies one call launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def _host_ms(fn: Callable[[], object], reps: int = 8) -> float:
    """Host time to issue one call (no synchronisation inside the loop): the launch cost a
    GPU faster than its host would wait for."""
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(reps):
        fn()
    issued = time.perf_counter() - begin
    torch.cuda.synchronize()
    return issued / reps * 1e3
