"""Closed forms for checkpointing under failures: Young, Daly, expected wall time, checkpoint size.

Pure functions, the oracles of the horizon engine (``simcluster.horizon``) and its fast pre-filter.
Sources and equations:

- Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
  ``tau = sqrt(2 delta M)``.
- Daly (2006), FGCS 22(3):303-312: expected wall time (Eq. 9) and the higher-order optimum
  (Eq. 37 in LLNL/scr @ee31e22 ``scripts/python/scr_ckpt_interval.py``).
- Kokolis et al. (HPCA 2025, arXiv 2410.21680): first-order expected ETTR.
- Rajbhandari et al., ZeRO (SC'20, arXiv 1910.02054) section 3.1: bytes of model state per parameter.

All times are seconds, sizes bytes, bandwidths bytes per second.
"""

from __future__ import annotations

import math

#: Checkpointed bytes per parameter with mixed-precision Adam: 16-bit weights (2) + fp32 master
#: weights (4) + Adam first (4) and second (4) moments. Gradients are not saved (ZeRO s3.1 counts
#: 16 bytes of model state including 2 bytes of 16-bit gradients).
ADAM_MIXED_CHECKPOINT_BYTES = 14.0
#: Of those, the 16-bit weights; the rest (12) is optimizer state that ZeRO shards over DP.
WEIGHT_BYTES_16BIT = 2.0


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum compute time between checkpoints, ``sqrt(2 delta M)``.

    Parameters
    ----------
    checkpoint_s : float
        Blocking cost of one checkpoint, delta (s).
    mtbf_s : float
        Mean time between failures of the job, M (s).
    """
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (Daly 2006; LLNL/scr "Eq. 37").

    ``tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta/(2M)) + 1/9 (delta/(2M))] - delta`` for
    ``delta < 2M``, else ``M``. Gives 116.7, 56.7 and 9.1 min for delta = 5 min and M = 24 h, 6 h,
    15 min (Daly's Figs 3-5: 117, 57, 9.1).
    """
    if checkpoint_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = checkpoint_s / (2.0 * mtbf_s)
    return young_interval_s(checkpoint_s, mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) \
        - checkpoint_s


def daly_expected_wall_s(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                         mtbf_s: float) -> float:
    """Daly's expected wall time to finish ``work_s`` of compute (Daly 2006, Eq. 9).

    ``E[T] = (T_s / tau) M e^{R/M} (e^{(tau + delta)/M} - 1)``: Poisson failures of mean ``M``; each
    segment of ``tau`` compute is followed by a blocking dump ``delta``; a failure anywhere in the
    segment (dump included) loses it; the restart ``R`` may itself fail.
    """
    segments = work_s / interval_s
    return segments * mtbf_s * math.exp(restart_s / mtbf_s) \
        * math.expm1((interval_s + checkpoint_s) / mtbf_s)


def daly_optimal_interval_numeric_s(checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """The interval minimising Eq. 9 (golden-section search on ``[delta/100, 10 M]``).

    Eq. 9 per unit work is ``(e^{(tau+delta)/M} - 1) / tau``; it is convex in tau, and its minimum
    does not depend on ``T_s`` or ``R``.
    """
    def cost(tau: float) -> float:
        return daly_expected_wall_s(1.0, tau, checkpoint_s, restart_s, mtbf_s)

    low, high = max(checkpoint_s, 1e-9) / 100.0, 10.0 * mtbf_s
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(200):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if cost(a) < cost(b):
            high = b
        else:
            low = a
    return (low + high) / 2.0


def first_order_waste(checkpoint_s: float, interval_s: float, recovery_s: float, mtbf_s: float,
                      persist_s: float = 0.0) -> float:
    """Expected fraction of time lost, to first order (Young 1974's terms, plus recovery and persist lag).

    ``waste = delta_b/tau + (tau/2 + delta_p + R)/M``: blocking checkpoint time per interval, plus,
    per failure, half an interval of rework, the persist lag of an asynchronous checkpoint
    (``persist_s``, 0 for synchronous) and the recovery time ``R`` (detect to resumed progress).
    """
    return checkpoint_s / interval_s + (interval_s / 2.0 + persist_s + recovery_s) / mtbf_s


def meta_expected_ettr(nodes: int, failures_per_node_s: float, restart_s: float, interval_s: float,
                       checkpoint_s: float) -> float:
    """Kokolis et al. (HPCA 2025) first-order E[ETTR] (queue term omitted).

    ``E[ETTR] = (1 - N r_f (u0 + dt/2)) / (1 + w/dt)``; 0.931 at N = 2048, r_f = 6.5e-3/day,
    u0 = 5 min, dt = 5 min, w = 0.
    """
    return (1.0 - nodes * failures_per_node_s * (restart_s + interval_s / 2.0)) \
        / (1.0 + checkpoint_s / interval_s)


def checkpoint_bytes(params: float, bytes_per_param: float = ADAM_MIXED_CHECKPOINT_BYTES) -> float:
    """Size of one full checkpoint, ``bytes_per_param * params`` (405B at 14 B/param: 5.67 TB).

    The total does not depend on the sharding: every shard is written once.
    """
    return bytes_per_param * params


def checkpoint_bytes_per_gpu(params: float, model_parallel: int, dp: int, zero_stage: int,
                             bytes_per_param: float = ADAM_MIXED_CHECKPOINT_BYTES) -> float:
    """Largest per-GPU share of a checkpoint under a TP x PP x CP x DP layout.

    Weights (2 B/param) are split over the ``model_parallel = tp*pp*cp`` ranks and written by one
    DP rank; optimizer state (``bytes_per_param - 2``) is split over model-parallel ranks and, with
    ZeRO stage >= 1 (distributed optimizer), also over the ``dp`` ranks::

        per_gpu = 2 P / mp + (b - 2) P / (mp * (dp if zero_stage >= 1 else 1))

    Llama 3 (405B, mp = 128, dp = 128, ZeRO-1): 6.3 GB + 0.3 GB; the paper reports 1 MB to 4 GB
    per GPU (its layout differs).
    """
    weights = WEIGHT_BYTES_16BIT * params / model_parallel
    shards = model_parallel * (dp if zero_stage >= 1 else 1)
    return weights + (bytes_per_param - WEIGHT_BYTES_16BIT) * params / shards


#: Pinned device-to-host copies reach 0.86 of the PCIe line rate: 54.9 GB/s of PCIe 5.0 x16's 64
#: on an H100 SXM for 1-4 GiB copies (tests/validation/data/h100_measured/host_link.csv,
#: analysis/device/host_link.py); pageable copies reach 14-16 GB/s.
PINNED_COPY_EFFICIENCY = 0.86


def snapshot_time_s(shard_bytes: float, pcie_Bps: float, gpus_per_link: int = 1) -> float:
    """Device-to-host snapshot of one GPU's checkpoint shard into pinned host memory, every GPU
    copying at once: ``shard x gpus sharing the upstream link / (pcie x 0.86)`` (6.6 GB on one
    PCIe 5.0 x16 link: 0.12 s)."""
    return shard_bytes * gpus_per_link / (pcie_Bps * PINNED_COPY_EFFICIENCY)


def transfer_time_s(size_bytes: float, bandwidth_Bps: float) -> float:
    """Time to move ``size_bytes`` at ``bandwidth_Bps`` (405B checkpoint at 2 TB/s: 2.8 s)."""
    return size_bytes / bandwidth_Bps


def mtbf_s(nodes: int, failures_per_node_s: float) -> float:
    """Job mean time between failures, ``1 / (N r)`` (infinite without failures)."""
    rate = nodes * failures_per_node_s
    return math.inf if rate <= 0.0 else 1.0 / rate


def daly_log_expected_wall_per_work(interval_s: float, checkpoint_s: float, restart_s: float,
                                    mtbf_s: float) -> float:
    """``ln(E[T_wall] / T_s)`` of Daly's Eq. 9, finite where ``E[T_wall]`` overflows a float.

    ``ln E/T_s = ln(M/tau) + R/M + ln(e^x - 1)`` with ``x = (tau + delta)/M`` and
    ``ln(e^x - 1) = x + ln(1 - e^-x)``; ``+inf`` for an infinite interval (no checkpoints on an
    endless run), ``0`` without failures (``M`` infinite: no loss but the blocking dumps is counted
    by the caller).
    """
    if math.isinf(mtbf_s):
        return 0.0
    if math.isinf(interval_s):
        return math.inf
    x = (interval_s + checkpoint_s) / mtbf_s
    log_expm1 = math.log(math.expm1(x)) if x < 30.0 else x + math.log1p(-math.exp(-x))
    return math.log(mtbf_s / interval_s) + restart_s / mtbf_s + log_expm1


def daly_work_fraction(interval_s: float, checkpoint_s: float, restart_s: float,
                       mtbf_s: float) -> float:
    """Expected useful fraction of wall time, ``T_s / E[T_wall]`` of Daly's Eq. 9 (0 on underflow).

    The expected progress per unit time of a policy: about 0 when the checkpoint dump
    (``delta``) or the restart (``R``) is long against the MTBF (a failure nearly always strikes
    before the dump or the restart completes).
    """
    log_ratio = daly_log_expected_wall_per_work(interval_s, checkpoint_s, restart_s, mtbf_s)
    return math.exp(-log_ratio) if log_ratio < 700.0 else 0.0
