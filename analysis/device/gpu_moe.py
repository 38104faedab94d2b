"""Mixture-of-experts kernels: grouped expert GEMMs by tokens per expert, token permute and
unpermute, and the router, in bf16.

Expert shapes of published MoE models (hidden, expert FFN width; HF configs): Mixtral 8x7B
(4096, 14336), Qwen3-30B-A3B (2048, 768), DeepSeek-V3 (7168, 2048), GPT-OSS-120B (2880, 2880).
For ``local`` experts on one GPU (after expert parallelism) and ``tpe`` tokens routed to each, the
SwiGLU expert MLP is an up GEMM ``[tpe, h] x [h, 2f]`` and a down GEMM ``[tpe, f] x [f, h]`` per
expert, run either as one grouped kernel (``torch._grouped_mm``, what torchtitan and Megatron-Core's
grouped GEMM use) or as one GEMM per expert in a loop (Megatron's SequentialMLP). Balanced routing;
``skew`` rows give half the tokens to a quarter of the experts. Permute: ``index_select`` of the
tokens into expert order (top-k copies); unpermute: the weighted ``index_add_`` back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda

BF16 = torch.bfloat16
MODELS = {"mixtral-8x7b": (4096, 14336), "qwen3-30b-a3b": (2048, 768),
          "deepseek-v3": (7168, 2048), "gpt-oss-120b": (2880, 2880)}
LOCAL = (1, 4, 8, 32)
TOKENS_PER_EXPERT = (128, 512, 1024, 2048, 4096, 8192)


def _counts(local: int, tpe: int, skew: bool) -> list[int]:
    """Tokens per expert (multiples of 16), balanced or half of them on a quarter of the experts."""
    if not skew or local < 4:
        return [tpe] * local
    total, hot = tpe * local, max(1, local // 4)
    hot_each = total // 2 // hot // 16 * 16
    cold_each = (total - hot_each * hot) // (local - hot) // 16 * 16
    return [hot_each] * hot + [cold_each] * (local - hot)


def _grouped(x: torch.Tensor, w: torch.Tensor, counts: list[int]) -> Callable[[], object]:
    offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
    wt = w.transpose(-2, -1)  # [E, K, N] column-major, as torchtitan passes it
    return lambda: torch._grouped_mm(x, wt, offs=offs, out_dtype=BF16)


def _loop(x: torch.Tensor, w: torch.Tensor, counts: list[int]) -> Callable[[], object]:
    chunks = list(x.split(counts))
    return lambda: [nnf.linear(c, w[e]) for e, c in enumerate(chunks)]


def run_moe(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "moe.csv")
    for model, (h, f) in MODELS.items():
        for local in LOCAL:
            for tpe in TOKENS_PER_EXPERT:
                for skew in (False, True) if local >= 4 else (False,):
                    if time.time() > deadline:
                        log(out, "moe: deadline reached, rest skipped")
                        return
                    _gemm_point(out, table, model, h, f, local, tpe, skew)
        _routing_point(out, table, model, h, f)
    torch.cuda.empty_cache()


def _gemm_point(out: Path, table: Table, model: str, h: int, f: int, local: int, tpe: int,
                skew: bool) -> None:
    counts = _counts(local, tpe, skew)
    tokens = sum(counts)
    if tokens * max(h, 2 * f) * 2 > 8 << 30 or local * h * 2 * f * 2 > 16 << 30:
        return  # over 8 GiB of activations or 16 GiB of weights: not a shape one GPU runs
    for gemm, (n, k) in (("up", (2 * f, h)), ("down", (h, f))):
        x = torch.randn(tokens, k, device="cuda", dtype=BF16)
        w = torch.randn(local, n, k, device="cuda", dtype=BF16)
        for impl, make in (("grouped", _grouped), ("loop", _loop)):
            try:
                med, _, _ = time_cuda(make(x, w, counts), min_ms=20.0, max_reps=50)
            except Exception as exc:
                log(out, f"moe {impl} {model} {gemm} {local}x{tpe} skew={skew}: {exc!r}"[:300])
                continue
            table.add({"what": "expert_gemm", "model": model, "gemm": gemm, "impl": impl,
                       "local_experts": local, "tokens_per_expert": tpe, "skew": int(skew),
                       "tokens": tokens, "N": n, "K": k, "ms": med,
                       "tflops": 2.0 * tokens * n * k / med / 1e9, "GBps": float("nan")})
        del x, w
    torch.cuda.empty_cache()


def _routing_point(out: Path, table: Table, model: str, h: int, f: int) -> None:
    """Router (GEMM, softmax, top-k) and permute/unpermute for 16k tokens, top-8 of 64 experts."""
    tokens, experts, top_k = 16384, 64, 8
    try:
        x = torch.randn(tokens, h, device="cuda", dtype=BF16)
        wr = torch.randn(experts, h, device="cuda", dtype=BF16)
        idx = torch.randint(0, tokens, (tokens * top_k,), device="cuda")
        perm = x.index_select(0, idx)
        probs = torch.rand(tokens * top_k, 1, device="cuda", dtype=BF16)
        dst = torch.zeros_like(x)

        def router() -> object:
            return torch.topk(torch.softmax(nnf.linear(x, wr).float(), dim=-1), top_k, dim=-1)

        ops: list[tuple[str, float, Callable[[], object]]] = [
            ("router", 2.0 * tokens * h, router),
            ("permute", 2.0 * 2 * tokens * top_k * h, lambda: x.index_select(0, idx)),
            ("unpermute", 2.0 * (3 * tokens * top_k * h),  # read, weigh, add: 3 passes
             lambda: dst.index_add_(0, idx, perm * probs)),
        ]
        for name, nbytes, fn in ops:
            med, _, _ = time_cuda(fn, min_ms=20.0, max_reps=100)
            table.add({"what": name, "model": model, "gemm": "", "impl": "eager",
                       "local_experts": experts, "tokens_per_expert": tokens * top_k // experts,
                       "skew": 0, "tokens": tokens, "N": h, "K": top_k, "ms": med,
                       "tflops": float("nan"), "GBps": nbytes / med / 1e6})
    except Exception as exc:
        log(out, f"moe routing {model}: {exc!r}"[:300])
    torch.cuda.empty_cache()
