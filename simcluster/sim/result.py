"""The result of a simulated step (:class:`DesResult`) and how it was extrapolated, if it was."""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.observe.records import OpRecord
from simcluster.perf.step import TimeBreakdown
from simcluster.sim.plan import StepPlan


@dataclass(frozen=True, slots=True)
class Extrapolation:
    """How an extrapolated step was obtained.

    Attributes
    ----------
    micro_batches : int
        Micro-batches of the step reported.
    simulated_micro_batches : int
        Micro-batches of the simulated step whose records and critical path are kept.
    period : int
        Micro-batches per period of the steady state.
    repeats : int
        Periods added to the simulated step.
    records : int
        Records the full simulation writes (the simulated count plus ``repeats`` increments).
    critical_path_records : int
        Records on the full simulation's critical path.
    counts_exact : bool
        The record counts grew by one increment per period in every sample (False: a wait that
        is zero up to rounding came and went, and the counts are advanced by the mean increment;
        the times are exact either way).
    """

    micro_batches: int
    simulated_micro_batches: int
    period: int
    repeats: int
    records: int
    critical_path_records: int
    counts_exact: bool = True



@dataclass(frozen=True, slots=True)
class DesResult:
    """One simulated step, shaped like :class:`simcluster.perf.step.StepEstimate`.

    Attributes
    ----------
    iteration_time_s : float
        Step time, seconds (equals ``breakdown.total_s``).
    breakdown : TimeBreakdown
        Exposed seconds per category on the critical stage.
    model_flops, hardware_flops : float
        Per step, whole job (as the analytical estimate).
    dp_total_s, dp_hidden_s : float
        DP bucket reduction on the critical stage: wall time on the DP stream, and the part
        hidden under compute.
    critical_group, critical_stage : str, int
        The replica class and stage that held the step up.
    critical_path : tuple[OpRecord, ...]
        The chain of ops, waits and transfers that released one another, start to end.
    records : tuple[OpRecord, ...]
        The event log (of the simulated step only when extrapolated).
    plan : StepPlan
        What was simulated (replica classes and multiplicities included).
    extrapolation : Extrapolation, optional
        Set when the step was extrapolated from a periodic steady state (:mod:`.periodic`): the
        times, breakdown, DP totals and counts are the whole step's, ``records``,
        ``critical_path`` and ``plan`` those of the last simulated step.
    """

    iteration_time_s: float
    breakdown: TimeBreakdown
    model_flops: float
    hardware_flops: float
    dp_total_s: float
    dp_hidden_s: float
    critical_group: str
    critical_stage: int
    critical_path: tuple[OpRecord, ...]
    records: tuple[OpRecord, ...]
    plan: StepPlan
    extrapolation: Extrapolation | None = None

    @property
    def record_count(self) -> int:
        """Records of the whole step (the full simulation's count when extrapolated)."""
        return self.extrapolation.records if self.extrapolation else len(self.records)

    @property
    def critical_path_records(self) -> int:
        """Records on the whole step's critical path."""
        x = self.extrapolation
        return x.critical_path_records if x else len(self.critical_path)

    @property
    def bubble_fraction(self) -> float:
        """Pipeline idle share of the step (bubble / step time)."""
        return self.breakdown.bubble / self.iteration_time_s if self.iteration_time_s else 0.0

    @property
    def simulated_gpus(self) -> int:
        """Stage GPUs actually simulated (replica classes x stages)."""
        return len(self.plan.stages)

    def event_log(self) -> list[str]:
        """One line per record, times in ns: the golden-test form of the step."""
        return [f"{r.eid} {r.group} s{r.stage} {r.stream} {r.name} {r.category} "
                f"{r.start_s * 1e9:.3f} {r.end_s * 1e9:.3f} gate={r.gate}" for r in self.records]
