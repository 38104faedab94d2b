"""The step plan: what every simulated stage runs, with durations already computed.

Built once from a scenario by :mod:`.build` (or by hand in tests); the SimPy processes only walk
it. Durations are seconds. A plan covers one representative DP replica per replica class
(``GroupPlan``), each class with its multiplicity (symmetry; docs/des.md, "Symmetry").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

#: A pipeline message key: (``"a"`` activations | ``"g"`` gradients, receiving virtual stage, mb).
MsgKey = tuple[str, int, int]


class Send(NamedTuple):
    """A pipeline send after an op: to ``dst`` stage, ``work_s`` alone on idle links (a named
    tuple, like :class:`Op`)."""

    key: MsgKey
    dst: int
    work_s: float


@dataclass(frozen=True, slots=True)
class Zero3Pass:
    """ZeRO-3 collectives of one op, run layer by layer on the stage's links.

    Attributes
    ----------
    layers : int
        Layers the op covers; its compute is split evenly over them.
    gather_s : float
        Parameter all-gather before each layer's compute (0: none, e.g. ``W``).
    scatter_s : float
        Gradient reduce-scatter after each layer's compute (0 in forward and ``Bi``).
    prefetch : bool
        Issue the next layer's gather when a layer's compute starts and let reduce-scatters run
        behind the compute (the op ends when the last one has); otherwise every collective blocks.
    issued_from : int
        ``>= 0``: the gathers were issued at the step's start (ZeRO-1/2's overlapped parameter
        gather, :attr:`StagePlan.gathers`); the op's layers wait for the stage's gathers
        ``issued_from ...`` instead of issuing their own. -1: ZeRO-3's own.
    """

    layers: int
    gather_s: float
    scatter_s: float
    prefetch: bool
    issued_from: int = -1


class Op(NamedTuple):
    """One op of a stage's compute stream (an immutable named tuple: a plan holds one per op of
    every stage, tens of thousands, built by :mod:`.build` with ``tuple.__new__``).

    Attributes
    ----------
    name : str
        ``F c0 mb3`` (kind, local chunk, micro-batch).
    kind : str
        ``F``, ``B``, ``Bi`` or ``W``.
    duration_s : float
        Time on the compute stream, TP/CP/EP communication folded in (exposed, not overlapped).
    parts : tuple[tuple[str, float], ...]
        ``duration_s`` split by ledger category (``compute``, ``tp_comm``, ``cp_comm``, ``ep_comm``).
    recv : MsgKey | None
        The pipeline message the op waits for.
    send : Send | None
        The pipeline message sent when the op ends (the stream waits for it: blocking p2p).
    zero3 : Zero3Pass | None
        ZeRO-3 per-layer gathers and reduce-scatters of the op (None without ZeRO-3).
    buckets : tuple[tuple[int, float], ...]
        DP gradient buckets this op completes: (bucket index, fraction of the op when ready).
    """

    name: str
    kind: str
    duration_s: float
    parts: tuple[tuple[str, float], ...]
    recv: MsgKey | None = None
    send: Send | None = None
    zero3: Zero3Pass | None = None
    buckets: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class StagePlan:
    """One stage of one replica class: its ops in schedule order and its optimizer step.

    ZeRO-1/2's parameter all-gather (the previous step's, after its optimizer): ``prologue_s``, a
    synchronous one the stage's first op waits for (0: none); ``gathers``, the overlapped ones,
    ``(seconds each, count)``, one per layer issued back to back at the step's start, which the
    first forward of each chunk waits for layer by layer (``(0.0, 0)``: none).
    """

    group: str
    stage: int
    ops: tuple[Op, ...]
    optimizer_s: float
    prologue_s: float = 0.0
    gathers: tuple[float, int] = (0.0, 0)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """A replica class: ``multiplicity`` congruent DP replicas simulated once."""

    name: str
    multiplicity: int


@dataclass(frozen=True, slots=True)
class StepPlan:
    """Everything the engine needs for one step.

    Attributes
    ----------
    pp : int
        Pipeline stages.
    groups : tuple[GroupPlan, ...]
        Replica classes (their multiplicities sum to the DP degree).
    stages : tuple[StagePlan, ...]
        Group-major: ``stages[g * pp + i]``.
    dp_buckets : tuple[tuple[float, ...], ...]
        Per stage, the DP reduction of each gradient bucket in launch order, seconds alone on
        idle links (one collective joining every replica class; empty when dp = 1).
    link_capacity : dict[str, float]
        Link -> speed over nominal (1.0 when absent).
    comm_sm_share : float
        Share of a GPU's SMs an in-flight collective holds (:mod:`simcluster.perf.kernels.comm_sms`);
        compute beside DP and ZeRO collectives runs on for this share of the overlap (0: none).
    """

    pp: int
    groups: tuple[GroupPlan, ...]
    stages: tuple[StagePlan, ...]
    dp_buckets: tuple[tuple[float, ...], ...]
    link_capacity: dict[str, float]
    comm_sm_share: float = 0.0

    def stage(self, group: int, stage: int) -> StagePlan:
        """The plan of ``stage`` in replica class ``group``."""
        return self.stages[group * self.pp + stage]


def out_link(group: str, stage: int) -> str:
    """The sending side of a stage GPU's network share (NIC share or scale-up port)."""
    return f"{group}/s{stage}/out"


def in_link(group: str, stage: int) -> str:
    """The receiving side of a stage GPU's network share."""
    return f"{group}/s{stage}/in"
