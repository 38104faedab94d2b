"""Memory-bound kernels: achieved HBM bandwidth of copies, element-wise ops, norms, casts, the
loss and the optimizer step, as eager PyTorch runs them.

``bytes`` is the fewest bytes each op must move (every input read once, every output written once);
the achieved rate is those bytes over the measured time. A small-size sweep of the copy shows the
launch floor and the L2 (50 MB on the H100 SXM).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda

BF16, FP32, FP8 = torch.bfloat16, torch.float32, torch.float8_e4m3fn
N = 1 << 29  # elements of the large tensors: 1 GiB in bf16
HIDDEN = 4096


def _ops() -> list[tuple[str, float, Callable[[], object]]]:
    """(name, bytes moved, callable) of each measured op on N-element bf16 tensors."""
    x = torch.randn(N, device="cuda", dtype=BF16)
    y = torch.randn(N, device="cuda", dtype=BF16)
    z = torch.empty(N, device="cuda", dtype=BF16)
    x2 = x.view(-1, HIDDEN)
    w = torch.ones(HIDDEN, device="cuda", dtype=BF16)
    b = torch.zeros(HIDDEN, device="cuda", dtype=BF16)
    xg = x2.detach().requires_grad_(True)
    ln = nnf.layer_norm(xg, (HIDDEN,), w, b)
    dy = torch.randn_like(x2)
    half = x2.shape[1] // 2
    e = 2.0 * N  # bytes of one bf16 tensor
    return [
        ("copy", 2 * e, lambda: z.copy_(x)),
        ("add", 3 * e, lambda: torch.add(x, y, out=z)),
        ("mul_scalar", 2 * e, lambda: torch.mul(x, 0.5, out=z)),
        ("gelu", 2 * e, lambda: nnf.gelu(x)),
        ("gelu_tanh", 2 * e, lambda: nnf.gelu(x, approximate="tanh")),
        ("silu", 2 * e, lambda: nnf.silu(x)),
        ("swiglu_eager", 1.5 * e, lambda: nnf.silu(x2[:, :half]) * x2[:, half:]),
        ("dropout", 2 * e + N, lambda: nnf.dropout(x, 0.1, training=True)),
        ("layer_norm_fwd", 2 * e, lambda: nnf.layer_norm(x2, (HIDDEN,), w, b)),
        ("layer_norm_bwd", 3 * e, lambda: torch.autograd.grad(ln, xg, dy, retain_graph=True)),
        ("rms_norm_fwd", 2 * e, lambda: nnf.rms_norm(x2, (HIDDEN,), w)),
        ("softmax_2048", 2 * e, lambda: torch.softmax(x.view(-1, 2048), dim=-1)),
        ("cast_bf16_fp8", e + N, lambda: x.to(FP8)),
        ("amax_eager", e, lambda: x.abs().amax()),
        ("cast_bf16_fp32", e + 2 * e, lambda: x.to(FP32)),
    ]


def run_memory(out: Path, sampler: Sampler, deadline: float) -> None:
    table = Table(out / "membw.csv")
    try:
        ops = _ops()
    except Exception as exc:
        log(out, f"membw setup: {exc!r}"[:300])
        return
    for name, nbytes, fn in ops:
        _measure(out, table, sampler, name, nbytes, N, fn)
    del ops
    torch.cuda.empty_cache()
    for name, nbytes, n, fn in _loss_and_optimizer():
        _measure(out, table, sampler, name, nbytes, n, fn)
    torch.cuda.empty_cache()
    for n in (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30):
        if time.time() > deadline:
            return
        src = torch.randn(n, device="cuda", dtype=BF16)
        dst = torch.empty_like(src)
        _measure(out, table, sampler, "copy_size", 4.0 * n, n, lambda s=src, d=dst: d.copy_(s))
        del src, dst
    torch.cuda.empty_cache()


def _loss_and_optimizer() -> list[tuple[str, float, int, Callable[[], object]]]:
    tokens, vocab = 8192, 50304
    logits = torch.randn(tokens, vocab, device="cuda", dtype=BF16, requires_grad=True)
    target = torch.randint(0, vocab, (tokens,), device="cuda")

    def xent() -> object:
        loss = nnf.cross_entropy(logits.float(), target)
        return torch.autograd.grad(loss, logits)

    params = 1 << 28  # 256M fp32 parameters, one tensor
    p = torch.nn.Parameter(torch.randn(params, device="cuda", dtype=FP32))
    p.grad = torch.randn_like(p)
    fused = torch.optim.Adam([p], lr=1e-4, fused=True)
    q = torch.nn.Parameter(torch.randn(params, device="cuda", dtype=FP32))
    q.grad = torch.randn_like(q)
    foreach = torch.optim.Adam([q], lr=1e-4, foreach=True)
    lv = 2.0 * tokens * vocab
    # Adam: parameter, grad, m, v read (16 B) and parameter, m, v written (12 B)
    return [("cross_entropy_fp32_fwd_bwd", 2 * lv, tokens * vocab, xent),  # bf16 logits in, grad out
            ("adam_fused", 28.0 * params, params, fused.step),
            ("adam_foreach", 28.0 * params, params, foreach.step)]


def _measure(out: Path, table: Table, sampler: Sampler, name: str, nbytes: float, n: int,
             fn: Callable[[], object]) -> None:
    t0 = time.time()
    try:
        med, best, reps = time_cuda(fn, min_ms=20.0, max_reps=200)
    except Exception as exc:
        log(out, f"membw {name}: {exc!r}"[:300])
        return
    clk = sampler.window(t0, time.time())
    table.add({"op": name, "elements": n, "bytes": nbytes, "median_ms": med, "min_ms": best,
               "reps": reps, "GBps": nbytes / med / 1e6, "sm_MHz": clk["sm_MHz"],
               "power_W": clk["power_W"]})
