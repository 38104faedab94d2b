"""Attention kernels by sequence length, head dimension and mask, forward and forward+backward.

Every PyTorch SDPA backend the image has (flash = FlashAttention-2 built into PyTorch, cuDNN,
memory-efficient, and the unfused math path up to 4k), plus flash-attn 2 and 3 when those packages
are installed. The FlashAttention benchmark convention (Dao-AILab/flash-attention
benchmarks/benchmark_flash_attention.py): batch x seqlen = 16k tokens at hidden 2048, heads =
2048 / head_dim; forward FLOPs 4 b s^2 h d, halved with a causal mask; backward 2.5x the forward.
Past 16k the batch is 1 (32k and 64k tokens), to see whether the rate stays flat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda
from torch.nn.attention import SDPBackend, sdpa_kernel

SEQS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
HEAD_DIMS = (64, 128, 256)
SDPA = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}

Attn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def _sdpa(backend: SDPBackend) -> Attn:
    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        with sdpa_kernel([backend]):  # inputs [b, s, h, d] as models hold them
            o = nnf.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=causal)
        return o.transpose(1, 2)
    return run


def kernels(out: Path) -> dict[str, Attn]:
    """The attention kernels available on this machine, by simcluster's kernel names."""
    found: dict[str, Attn] = {name: _sdpa(b) for name, b in SDPA.items()}
    try:
        from flash_attn import flash_attn_func  # type: ignore[import-not-found]
        found["flash2"] = lambda q, k, v, c: flash_attn_func(q, k, v, causal=c)
    except Exception as exc:
        log(out, f"flash_attn (FlashAttention-2) not available: {exc!r}"[:200])
    try:
        from flash_attn_interface import flash_attn_func as fa3  # type: ignore[import-not-found]
        found["flash3"] = lambda q, k, v, c: _first(fa3(q, k, v, causal=c))
    except Exception as exc:
        log(out, f"flash_attn_interface (FlashAttention-3) not available: {exc!r}"[:200])
    return found


def _first(result: object) -> torch.Tensor:
    return result[0] if isinstance(result, tuple) else result  # type: ignore[return-value]


def _one(fn: Attn, seq: int, hd: int, causal: bool) -> tuple[float, float]:
    """(forward ms, forward+backward ms) at this point, FlashAttention benchmark shapes."""
    batch = max(1, 16384 // seq)
    heads = 2048 // hd
    q, k, v = (torch.randn(batch, seq, heads, hd, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, seq, heads, hd, device="cuda", dtype=torch.bfloat16)
    budget = 40.0 if seq <= 16384 else 120.0

    def fwd() -> object:
        with torch.no_grad():
            return fn(q, k, v, causal)

    def fwd_bwd() -> object:
        return torch.autograd.grad(fn(q, k, v, causal), (q, k, v), grad)

    f, _, _ = time_cuda(fwd, min_ms=budget, max_reps=30, warmup=2)
    fb, _, _ = time_cuda(fwd_bwd, min_ms=budget, max_reps=30, warmup=2)
    return f, fb


def run_attention(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "attention.csv")
    found = kernels(out)
    for name, fn in found.items():
        for hd in HEAD_DIMS:
            for causal in (True, False):
                for seq in SEQS:
                    if ((name == "math" and seq > 4096) or (name == "sdpa-efficient" and seq > 16384)
                            or (seq > 16384 and (hd != 128 or not causal))):
                        continue  # past 16k: head dim 128, causal (the training case)
                    if time.time() > deadline:
                        log(out, "attention: deadline reached, rest skipped")
                        return
                    _point(out, table, sampler, name, fn, seq, hd, causal)


def _point(out: Path, table: Table, sampler: Sampler, name: str, fn: Attn, seq: int, hd: int,
           causal: bool) -> None:
    batch, heads = max(1, 16384 // seq), 2048 // hd
    flops_fwd = 4.0 * batch * seq * seq * heads * hd / (2 if causal else 1)
    t0 = time.time()
    try:
        f, fb = _one(fn, seq, hd, causal)
    except Exception as exc:
        log(out, f"attention {name} d{hd} {'causal' if causal else 'full'} s{seq}: {exc!r}"[:240])
        torch.cuda.empty_cache()
        return
    clk = sampler.window(t0, time.time())
    bwd = fb - f
    table.add({"kernel": name, "head_dim": hd, "causal": int(causal), "seq": seq, "batch": batch,
               "heads": heads, "fwd_ms": f, "fwd_bwd_ms": fb,
               "fwd_tflops": flops_fwd / f / 1e9,
               "bwd_tflops": 2.5 * flops_fwd / bwd / 1e9 if bwd > 0 else float("nan"),
               "fwd_bwd_tflops": 3.5 * flops_fwd / fb / 1e9, "sm_MHz": clk["sm_MHz"],
               "power_W": clk["power_W"]})
    torch.cuda.empty_cache()
