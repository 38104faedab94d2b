"""Measure what calibrates simcluster on the GPU of this machine, in one run of a few minutes.

    PYTHONUNBUFFERED=1 python3 analysis/device/measure_gpu.py --out DIR [--budget-s 330] [--quick]

Sections, in this order, each bounded by the time left (a section past the deadline is cut short
and the rest still write what they measured):
  env        GPU, driver, CUDA, cuDNN, PyTorch versions; power limit and clocks (NVML)
  attention  SDPA flash / cuDNN / memory-efficient / math (and flash-attn 2/3 if installed) by
             sequence length, head dimension and mask, forward and forward+backward
  gemm       bf16 F.linear and fp8 torch._scaled_mm over training shapes
  layers     GPT and Llama layers in eager bf16: time and activation memory per layer
  membw      copies, element-wise ops, norms, casts, the loss and Adam: achieved bandwidth
  sustained  8192^3 bf16 then fp8 GEMMs back to back: rate, SM clock and power over time
  steady     GEMMs and layers held at the power limit (gpu_steady.py)
  memvar     activation bytes of layer variants (gpu_steady.py)
  moe        grouped expert GEMMs by tokens per expert, permute, unpermute, router (gpu_moe.py)
  moelayer   a whole dropless MoE block, forward and forward+backward, by tokens per micro-batch
             (gpu_moe_layer.py)
  compiled   four of the layers again under torch.compile: time and activation bytes (gpu_layers.py)
  power      every NVML sample of the run (clock, power, temperature, clock-event reasons)

Outputs (CSV per section, env.json, log.txt) go to --out; analysis/device/README.md says how they
were taken and where the stored copies live.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_attention import run_attention
from gpu_common import Sampler, Table, log, write_json
from gpu_gemm import run_gemms, run_sustained
from gpu_layers import run_compiled, run_layers
from gpu_memory import run_memory
from gpu_moe import run_moe
from gpu_moe_layer import run_moe_layer
from gpu_steady import run_memvar, run_steady

#: Share of the budget each section may use before the next starts (the sustained runs last).
SHARES = {"attention": 0.22, "gemm": 0.20, "layers": 0.18, "membw": 0.08, "steady": 0.3,
          "memvar": 0.02, "moe": 0.2, "moelayer": 0.2, "compiled": 0.3}
SECTIONS = {"attention": run_attention, "gemm": run_gemms, "layers": run_layers,
            "membw": run_memory, "steady": run_steady, "memvar": run_memvar, "moe": run_moe,
            "moelayer": run_moe_layer, "compiled": run_compiled}
FIRST_RUN = ("attention", "gemm", "layers", "membw", "sustained")


def environment(sampler: Sampler) -> dict[str, object]:
    props = torch.cuda.get_device_properties(0)
    env: dict[str, object] = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": props.name, "sms": props.multi_processor_count,
        "memory_GiB": props.total_memory / 2**30,
        "l2_MB": getattr(props, "L2_cache_size", 0) / 1e6,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
        "nvml": sampler.static,
    }
    try:
        env["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE,TEMPERATURE"],
            capture_output=True, text=True, timeout=20).stdout
    except Exception as exc:
        env["nvidia_smi"] = repr(exc)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=330.0)
    ap.add_argument("--sustained-s", type=float, default=25.0, help="seconds of each sustained run")
    ap.add_argument("--sections", default=",".join(FIRST_RUN),
                    help=f"comma-separated, of {', '.join([*SECTIONS, 'sustained'])}")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    sampler = Sampler()
    sampler.start()
    begin = time.time()
    write_json(out / "env.json", environment(sampler))
    log(out, f"env written after {time.time() - begin:.1f} s; budget {args.budget_s:.0f} s")
    wanted = args.sections.split(",")
    sustained = "sustained" in wanted
    available = args.budget_s - (2 * args.sustained_s if sustained else 0) - 10
    chosen = [name for name in SECTIONS if name in wanted]
    share = 0.0
    for name in chosen:
        run = SECTIONS[name]
        share += SHARES[name] / sum(SHARES[c] for c in chosen)
        deadline = max(begin + share * available, time.time() + 5)  # slack carries forward
        start = time.time()
        try:
            run(out, sampler, deadline)
        except Exception as exc:
            log(out, f"{name} failed: {exc!r}"[:400])
        torch.cuda.empty_cache()
        log(out, f"{name}: {time.time() - start:.1f} s (t = {time.time() - begin:.0f} s)")
    for dtype in ("bf16", "fp8_tensor") if sustained else ():
        try:
            run_sustained(out, sampler, dtype, args.sustained_s)
        except Exception as exc:
            log(out, f"sustained {dtype} failed: {exc!r}"[:400])
    sampler.stop()
    power = Table(out / "power.csv")
    for row in sampler.rows:
        power.add({**row, "t": row["t"] - begin})
    log(out, f"done in {time.time() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
