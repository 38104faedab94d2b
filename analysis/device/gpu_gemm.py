"""GEMM measurements: bf16 (nnf.linear) and fp8 (torch._scaled_mm, per-tensor and row-wise scales)
over training shapes, and the rate and clock an 8192^3 GEMM sustains for tens of seconds.

Shapes follow nnf.linear: y[M, N] = x[M, K] @ W[N, K]^T, M the tokens. Inputs are random normal
(zeros run faster, docs/catalog.md); small problems rotate among several input sets so repeated
calls do not run out of the 50 MB L2.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as nnf
from gpu_common import Sampler, Table, log, time_cuda

#: (N, K) weight shapes of transformer layers: for hidden h in 2048-8192 the fused QKV (3h x h),
#: the attention output (h x h), the MLP (4h x h and h x 4h); Llama SwiGLU MLPs (fused gate+up,
#: down) of the 7B (11008), 8B (14336) and 70B (28672) models.
WEIGHTS: list[tuple[int, int]] = [
    wk for h in (2048, 4096, 5120, 8192) for wk in ((3 * h, h), (h, h), (4 * h, h), (h, 4 * h))
] + [(22016, 4096), (4096, 11008), (28672, 4096), (4096, 14336), (57344, 8192), (8192, 28672)]
TOKENS = (512, 2048, 4096, 8192, 16384)
SQUARES = (256, 512, 1024, 2048, 4096, 8192, 16384)
#: Weight-gradient GEMMs: dW[N, K] = dy[M, N]^T @ x[M, K], reduction over the tokens.
WGRAD = [(4096, 4096, 8192), (16384, 4096, 8192), (4096, 16384, 8192), (12288, 4096, 4096),
         (8192, 8192, 4096), (28672, 8192, 4096), (8192, 28672, 4096)]

FP8 = torch.float8_e4m3fn


def _sets(nbytes: int) -> int:
    """Input sets to rotate among so the working set exceeds twice the L2 (at most 8)."""
    return int(min(8, max(1, (100 << 20) // max(nbytes, 1) + 1)))


def _linear_fn(m: int, n: int, k: int, dtype: str) -> tuple[object, int]:
    dev = "cuda"
    nbytes = (m * k + n * k) * (2 if dtype == "bf16" else 1)
    sets = _sets(nbytes)
    xs = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
    state = {"i": 0}
    if dtype == "bf16":
        return _rotating(xs, ws, state, sets), sets
    xq = [x.to(FP8) for x in xs]
    wq = [w.to(FP8) for w in ws]
    xs.clear()
    ws.clear()
    if dtype == "fp8_tensor":
        sa = torch.tensor(1.0, device=dev)
        sb = torch.tensor(1.0, device=dev)
    else:  # row-wise: one scale per row of x and per row of W
        sa = torch.ones(m, 1, device=dev)
        sb = torch.ones(1, n, device=dev)

    def fn8() -> object:
        i = state["i"] = (state["i"] + 1) % sets
        return torch._scaled_mm(xq[i], wq[i].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    return fn8, sets


def _rotating(xs: list[torch.Tensor], ws: list[torch.Tensor], state: dict[str, int],
              sets: int) -> object:
    def fn() -> object:
        i = state["i"] = (state["i"] + 1) % sets
        return nnf.linear(xs[i], ws[i])
    return fn


def _wgrad_fn(n: int, k: int, m: int) -> object:
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    return lambda: dy.t() @ x


def _shapes() -> list[tuple[int, int, int, str]]:
    shapes = [(s, s, s, "square") for s in SQUARES]
    shapes += [(m, n, k, "linear") for n, k in WEIGHTS for m in TOKENS]
    return shapes


def run_gemms(out: Path, sampler: Sampler, deadline: float) -> None:
    """bf16 and fp8 per-tensor over every shape; fp8 row-wise at 8192 tokens; bf16 wgrad."""
    table = Table(out / "gemm.csv")
    plan = [(m, n, k, kind, dt) for m, n, k, kind in _shapes() for dt in ("bf16", "fp8_tensor")]
    plan += [(8192, n, k, "linear", "fp8_row") for n, k in WEIGHTS]
    for m, n, k, kind, dt in plan:
        if time.time() > deadline:
            log(out, "gemm: deadline reached, rest skipped")
            return
        try:
            fn, sets = _linear_fn(m, n, k, dt)
            _record(table, sampler, fn, m, n, k, kind, dt, sets)
        except Exception as exc:
            log(out, f"gemm {dt} {m}x{n}x{k}: {exc!r}"[:300])
        torch.cuda.empty_cache()
    for n, k, m in WGRAD:
        try:
            _record(table, sampler, _wgrad_fn(n, k, m), n, k, m, "wgrad", "bf16", 1)
        except Exception as exc:
            log(out, f"wgrad {n}x{k}x{m}: {exc!r}"[:300])


def _record(table: Table, sampler: Sampler, fn: object, m: int, n: int, k: int, kind: str,
            dtype: str, sets: int) -> None:
    t0 = time.time()
    med, best, reps = time_cuda(fn, min_ms=25.0)  # type: ignore[arg-type]
    clk = sampler.window(t0, time.time())
    flops = 2.0 * m * n * k
    table.add({"kind": kind, "dtype": dtype, "M": m, "N": n, "K": k, "median_ms": med,
               "min_ms": best, "reps": reps, "input_sets": sets,
               "tflops_median": flops / med / 1e9, "tflops_max": flops / best / 1e9,
               "sm_MHz": clk["sm_MHz"], "power_W": clk["power_W"]})


def run_sustained(out: Path, sampler: Sampler, dtype: str, seconds: float, size: int = 8192) -> None:
    """Back-to-back size^3 GEMMs for ``seconds``: rate, SM clock and power per 0.25 s window."""
    table = Table(out / "sustained.csv")
    fn, _ = _linear_fn(size, size, size, dtype)
    one, _, _ = time_cuda(fn, min_ms=20.0)  # type: ignore[arg-type]
    per_window = max(1, int(250.0 / one))
    flops = 2.0 * size**3
    t_start = time.time()
    while time.time() - t_start < seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.time()
        s.record()
        for _ in range(per_window):
            fn()  # type: ignore[operator]
        e.record()
        e.synchronize()
        t1 = time.time()
        clk = sampler.window(t0, t1)
        table.add({"dtype": dtype, "size": size, "t_s": t1 - t_start, "gemms": per_window,
                   "tflops": flops * per_window / s.elapsed_time(e) / 1e9,
                   "sm_MHz": clk["sm_MHz"], "power_W": clk["power_W"], "temp_C": clk["temp_C"],
                   "reasons": clk["reasons"]})
    log(out, f"sustained {dtype} {size}^3: {seconds:.0f} s done")
