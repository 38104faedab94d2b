"""Closed forms for pipeline-parallel schedules: bubble, step time, in-flight micro-batches.

Equal stages, zero communication. These are the oracles the discrete-event pipeline must reproduce
when it runs without contention (docs/architecture.md), and the fast estimate used to prune sweeps.
Formulas: Narayanan et al. SC'21 (arXiv 2104.04473) section 2.2 for gpipe, 1f1b and interleaved;
Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024) and the sail-sg/zero-bubble-pipeline-parallelism
README for zb-h1; each function names its own.

Symbols: ``p`` stages, ``m`` micro-batches per step, ``v`` virtual stages (model chunks) per device,
``t_f`` / ``t_b`` forward / full backward time of one micro-batch on one stage (all its chunks),
``t_w`` the weight-gradient part of ``t_b`` (ZB-H1 only).
"""

from __future__ import annotations

from simcluster.errors import SpecError
from simcluster.spec.scenario import SCHEDULES


def _check(schedule: str, p: int, m: int, v: int) -> None:
    if schedule not in SCHEDULES:
        raise SpecError("schedule", f"{schedule!r} is not one of {list(SCHEDULES)}")
    if p < 1 or m < 1 or v < 1:
        raise SpecError("parallelism", f"need p, m, v >= 1, got p={p}, m={m}, v={v}")
    if v > 1 and schedule != "interleaved":
        raise SpecError("virtual_stages", f"v={v} needs schedule interleaved, not {schedule}")


def bubble_time_s(schedule: str, p: int, m: int, t_f: float, t_b: float, v: int = 1,
                  t_w: float = 0.0) -> float:
    """Idle time of a stage over one step (the pipeline bubble), seconds.

    - gpipe, 1f1b: ``(p-1)(t_f+t_b)`` (Narayanan et al. SC'21 section 2.2; DualPipe README
      "1F1B (PP-1)(F+B)").
    - interleaved: ``(p-1)(t_f+t_b)/v`` (Narayanan et al. SC'21 section 2.2.2).
    - zb-h1: ``(p-1)(t_f+t_b-2 t_w)``, with ``t_b`` the full backward including ``t_w``; in ZB
      notation ``(p-1)(T_F+T_B-T_W)`` (DualPipe README; sail-sg/zero-bubble-pipeline-parallelism
      README). The closed form assumes ``T_W <= T_F + T_B``; it is clamped at zero otherwise.

    Parameters
    ----------
    schedule : str
        ``gpipe``, ``1f1b``, ``interleaved`` or ``zb-h1``.
    p, m, v : int
        Stages, micro-batches, virtual stages per device (``v > 1`` only with interleaved).
    t_f, t_b, t_w : float
        Per-micro-batch, per-stage forward, full backward and weight-gradient times, seconds.

    Returns
    -------
    float
        Seconds.
    """
    _check(schedule, p, m, v)
    if min(t_f, t_b, t_w) < 0 or t_w > t_b:
        raise SpecError("stage_times",
                        f"need t_f >= 0 and 0 <= t_w <= t_b, got {t_f}, {t_b}, {t_w}")
    if schedule == "zb-h1":
        return (p - 1) * max(t_f + t_b - 2.0 * t_w, 0.0)  # W fills the cool-down bubble
    return (p - 1) * (t_f + t_b) / v  # v = 1 except interleaved


def pipeline_time_s(schedule: str, p: int, m: int, t_f: float, t_b: float, v: int = 1,
                    t_w: float = 0.0) -> float:
    """Step time of the pipeline: ``m(t_f+t_b)`` of work per stage plus the bubble, seconds."""
    return m * (t_f + t_b) + bubble_time_s(schedule, p, m, t_f, t_b, v, t_w)


def bubble_fraction(schedule: str, p: int, m: int, v: int = 1) -> float:
    """Idle share of the step for equal stages (bubble / step time).

    gpipe, 1f1b: ``(p-1)/(m+p-1)``; interleaved: ``(p-1)/(v m + p-1)``; zb-h1 with
    ``T_F = T_B = T_W`` (so ``t_b = 2 t_f``, ``t_w = t_f``): bubble ``(p-1) t_f`` against 1F1B's
    ``3(p-1) t_f``, i.e. ``(p-1)/(3m + p-1)`` (sail-sg/zero-bubble-pipeline-parallelism README: "B/3").
    """
    t_f, t_b, t_w = (1.0, 2.0, 1.0) if schedule == "zb-h1" else (1.0, 2.0, 0.0)
    bubble = bubble_time_s(schedule, p, m, t_f, t_b, v, t_w)
    return bubble / (m * (t_f + t_b) + bubble)


def bubble_over_ideal(schedule: str, p: int, m: int, v: int = 1) -> float:
    """Bubble time over ideal (bubble-free) time: ``(p-1)/m`` for 1F1B, ``(p-1)/(v m)`` interleaved.

    Narayanan et al. SC'21 section 2.2 state the bubble relative to the ideal time this way;
    zb-h1 uses ``T_F = T_B = T_W`` as in :func:`bubble_fraction`.
    """
    fraction = bubble_fraction(schedule, p, m, v)
    return fraction / (1.0 - fraction)


def in_flight_microbatches(schedule: str, p: int, m: int, v: int = 1, stage: int = 0) -> float:
    """Micro-batches whose activations a stage holds at its peak (micro-batch equivalents).

    :func:`in_flight_chunks` over ``v``: each chunk of a micro-batch holds ``1/v`` of the stage's
    layers (an even split); on stage 0 with interleaving this is ``p (1 + (p-1)/(p v))``,
    Megatron's interleave memory factor (``theoretical_memory_usage.py``).
    """
    return in_flight_chunks(schedule, p, m, v, stage) / v


def in_flight_chunks(schedule: str, p: int, m: int, v: int = 1, stage: int = 0) -> int:
    """(micro-batch, chunk) forwards whose activations a stage holds at its peak.

    The one formula of the pipeline's in-flight activations: :func:`in_flight_microbatches` and the
    memory model's per-chunk split (:func:`simcluster.perf.memory_stage.in_flight_units`) use it.

    - no pipeline (``p == 1``): every schedule is plain gradient accumulation, each micro-batch's
      forward followed by its backward (Megatron-LM ``forward_backward_no_pipelining``): one.
    - gpipe: all ``m`` forwards run before any backward.
    - 1f1b, zb-h1: ``min(p - stage, m)``: Megatron's warm-up ``min(p - stage - 1, m)`` forwards
      plus the one of the first steady 1F1B step (Megatron-LM ``schedules.py``).
    - interleaved: warm-up ``2(p - stage - 1) + (v-1) p`` chunks plus one, capped at ``m v``
      (Megatron-LM ``schedules.py``, ``forward_backward_pipelining_with_interleaving``).

    Parameters
    ----------
    schedule : str
        Pipeline schedule.
    p, m, v : int
        Stages, micro-batches per step, virtual stages per device.
    stage : int
        Pipeline rank, ``0 <= stage < p`` (0 holds the most).

    Returns
    -------
    int
        Forward passes of one chunk of one micro-batch held at once (``v == 1``: micro-batches).
    """
    _check(schedule, p, m, v)
    if not 0 <= stage < p:
        raise SpecError("stage", f"must be in [0, {p}), got {stage}")
    if p == 1:
        return 1
    if schedule == "gpipe":
        return m
    if schedule == "interleaved":
        return min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v)
    return min(p - stage, m)
