"""Device-to-host and host-to-device copy bandwidth over the GPU's host link (PCIe or C2C): what a
checkpoint snapshot to host memory runs at.

    PYTHONUNBUFFERED=1 python3 analysis/device/host_link.py --out DIR

Copies of 64 MiB to 4 GiB, pinned (page-locked, ``pin_memory()``) and pageable host buffers, each
direction timed with CUDA events around ``copy_`` (median of 5 after one warm-up); GB/s = bytes /
time (10^9). Writes ``host_link.csv`` and the link's negotiated generation and width (NVML).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import torch

SIZES_MIB = (64, 256, 1024, 4096)


def _time_ms(dst: torch.Tensor, src: torch.Tensor) -> float:
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _link() -> dict[str, object]:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {"pcie_gen": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                "pcie_width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                "pcie_gen_max": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                "pcie_width_max": pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)}
    except Exception as exc:  # no NVML: the copies still run
        return {"nvml": repr(exc)[:200]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    link = _link()
    print(torch.cuda.get_device_name(0), torch.__version__, link, flush=True)
    with (args.out / "host_link.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["gpu", "link", "host_memory", "direction", "MiB", "ms", "GBps"])
        for mib in SIZES_MIB:
            n = mib << 20
            dev = torch.empty(n, dtype=torch.uint8, device="cuda")
            for kind in ("pinned", "pageable"):
                host = torch.empty(n, dtype=torch.uint8, pin_memory=kind == "pinned")
                host.fill_(1)
                for direction, (dst, src) in (("d2h", (host, dev)), ("h2d", (dev, host))):
                    ms = _time_ms(dst, src)
                    writer.writerow([torch.cuda.get_device_name(0), link, kind, direction, mib,
                                     f"{ms:.4f}", f"{n / ms / 1e6:.2f}"])
                    print(kind, direction, mib, f"{n / ms / 1e6:.1f} GB/s", flush=True)
                del host
            del dev
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
