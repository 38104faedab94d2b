"""The library entry point: :func:`sweep` returns a pandas DataFrame; :func:`prepare` and
:func:`execute` are the two halves the CLI uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcluster import catalog
from simcluster.errors import SpecError, check_choice
from simcluster.spec.loader import SWEEP_KEY
from simcluster.sweep import config
from simcluster.sweep.driver import Execution, SweepOutcome, identity_of, run_sweep
from simcluster.sweep.evaluate import AnalyticalTask
from simcluster.sweep.limits import MAX_GOODPUT, MAX_RERANK

if TYPE_CHECKING:
    import pandas as pd

CONTENTION_MODES = ("auto", "on", "off")
Source = str | Path | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """A sweep as asked: the scenario file and every flag (``None``: the file's section decides)."""

    source: Source
    overrides: tuple[str, ...] = ()
    vary: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    layouts: str | None = None
    objective: str | None = None
    top: int | None = None
    rerank: int | None = None
    goodput: int | None = None
    constraints: Mapping[str, Any] = field(default_factory=dict)
    contention: str = "auto"
    gpus: int | None = None
    options: tuple[str, ...] = ()  # --option 'NAME: KEY=V1,V2 ...'


def _section(source: Source) -> tuple[dict[str, Any], str]:
    if isinstance(source, Mapping):
        return config.read_section(source.get(SWEEP_KEY), "<inline>"), "<inline>"
    path = Path(source)
    raw = catalog.load_yaml_file(path)
    return config.read_section(raw.get(SWEEP_KEY), str(path)), str(path)


def _count(request: int | None, section: Mapping[str, Any], key: str, default: int,
           source: str, most: int) -> int:
    value = request if request is not None else section.get(key, default)
    where, src = (f"--{key}", "") if request is not None else (f"sweep.{key}", source)
    count = config.as_int(value, where, src)
    if count > most:
        raise SpecError(where, f"{count} is more than {most}", src)
    return count


def prepare(request: Request) -> tuple[AnalyticalTask, config.Plan, str]:
    """The analytical task, the plan and the store identity of ``request`` (checked)."""
    section, label = _section(request.source)
    layouts = check_choice("--layouts" if request.layouts else "sweep.layouts",
                           request.layouts or section.get("layouts", "search"),
                           config.LAYOUT_MODES, "" if request.layouts else label)
    wanted = request.objective or section.get("objective", "step_time_s")
    if isinstance(wanted, str):  # anything else (a list, a mapping) is refused as not a choice
        wanted = config.ALIASES.get(wanted, wanted)
    objective = check_choice("--objective" if request.objective else "sweep.objective",
                             wanted, tuple(config.OBJECTIVES),
                             "" if request.objective else label)
    check_choice("--contention", request.contention, CONTENTION_MODES)
    vary = config.as_mapping(section.get("vary", {}), "sweep.vary", label)
    plan = config.Plan(
        settings=config.settings_from(section.get("options"),
                                      {k: v if isinstance(v, list) else [v]
                                       for k, v in vary.items()}, label, request.vary,
                                      layouts == "search", request.options),
        axes=config.axes_from(section.get("search"), request.search, label),
        layouts=layouts, objective=objective,
        constraints=config.constraints_from(section.get("constraints"), request.constraints, label),
        top=_count(request.top, section, "top", 10, label, 10**6),
        rerank=_count(request.rerank, section, "rerank", 0, label, MAX_RERANK),
        goodput=_count(request.goodput, section, "goodput", 0, label, MAX_GOODPUT))
    source = request.source if isinstance(request.source, Mapping) else str(request.source)
    task = AnalyticalTask(dict(source) if isinstance(source, Mapping) else source,
                          request.overrides, plan.settings, plan.axes, layouts == "search",
                          plan.constraints.memory_headroom_gib, request.contention)
    for index, setting in enumerate(plan.settings):
        _check_setting(task, index, setting.option)
    _check_passes(task, plan, label, bool(request.objective), request.goodput is not None)
    if request.gpus is not None:
        task = _with_gpus(task, request.gpus)
        plan = dataclasses.replace(plan, settings=task.settings)
    identity = identity_of(request.source, request.overrides, plan,
                           {"contention": request.contention})
    return task, plan, identity


def _check_setting(task: AnalyticalTask, index: int, option: str) -> None:
    try:
        task.base(index)
    except SpecError as err:
        where = f" (sweep option {option!r})" if option else ""
        if err.source == "--set" and task.settings[index].overrides:
            raise SpecError(err.key, err.message + where, "sweep/--vary") from None
        raise SpecError(err.key, err.message + where, err.source) from None


def _check_passes(task: AnalyticalTask, plan: config.Plan, label: str, objective_flag: bool,
                  goodput_flag: bool) -> None:
    """The reliability objective needs the reliability pass, which needs its scenario sections."""
    if plan.objective == "goodput_time_to_train_days" and not plan.goodput:
        raise SpecError("--objective" if objective_flag else "sweep.objective",
                        "goodput ranks the layouts the reliability pass ran on: give --goodput N "
                        "(or sweep.goodput)", "" if objective_flag else label)
    base = task.base(0)
    if plan.goodput and (base.reliability is None or base.training.tokens is None):
        raise SpecError("--goodput" if goodput_flag else "sweep.goodput",
                        "needs the scenario's reliability section and training.tokens (the "
                        "reliability engine simulates the whole run)", "" if goodput_flag else label)


def _with_gpus(task: AnalyticalTask, gpus: int) -> AnalyticalTask:
    """Every setting on ``gpus`` GPUs (``cluster.nodes`` = gpus / GPUs per node)."""
    settings = []
    for index, setting in enumerate(task.settings):
        per_node = task.base(index).cluster.topology.gpus_per_node
        if gpus % per_node:
            raise SpecError("--gpus", f"{gpus} is not a whole number of nodes of "
                            f"{per_node} GPUs ({task.base(index).cluster.topology.name})")
        settings.append(dataclasses.replace(
            setting, overrides=(*setting.overrides, f"cluster.nodes={gpus // per_node}")))
    task = dataclasses.replace(task, settings=tuple(settings))
    for index, setting in enumerate(task.settings):
        _check_setting(task, index, setting.option)
    return task


def execute(request: Request, execution: Execution | None = None) -> SweepOutcome:
    """Prepare and run ``request``."""
    task, plan, identity = prepare(request)
    return run_sweep(task, plan, execution or Execution(), identity)


def frame(outcome: SweepOutcome) -> pd.DataFrame:
    """The eligible rows best first (``rank`` 1, 2, ...; ``pareto`` marks the front); the
    rejection counts in ``attrs["rejections"]`` and the full table in ``attrs["all_rows"]``."""
    import pandas as pd

    rows = [{**outcome.rows[i], "rank": n + 1, "pareto": i in set(outcome.pareto)}
            for n, i in enumerate(outcome.ranked)]
    df = pd.DataFrame(rows)
    df.attrs["rejections"] = [dict(zip(("level", "key", "count", "example"), r, strict=True))
                              for r in outcome.rejections.rows()]
    df.attrs["evaluated"] = len(outcome.rows)
    return df


def sweep(scenario: Source, *, overrides: Sequence[str] = (), vary: Sequence[str] = (),
          search: Sequence[str] = (), layouts: str | None = None, objective: str | None = None,
          top: int | None = None, rerank: int | None = None, goodput: int | None = None,
          constraints: Mapping[str, Any] | None = None, contention: str = "auto", jobs: int | None = 1,
          backend: str = "local", ray_address: str | None = None, out: str | Path | None = None,
          progress: bool = False, replicas: int = 100, gpus: int | None = None,
          results: str = "parquet", options: Sequence[str] = ()) -> pd.DataFrame:
    """Sweep ``scenario``: every valid layout (and every option and varied value), ranked.

    Arguments are those of ``simcluster sweep`` (docs/sweep.md); ``vary`` and ``search`` items are
    ``KEY=V1,V2`` texts, ``constraints`` a mapping of ``max_gpus``, ``max_cost_usd``,
    ``max_days``, ``memory_headroom_gib`` (GiB or ``"auto"``); ``results`` is ``--results``
    (``parquet``, ``csv`` or ``csv.gz``); ``options`` are ``--option`` texts. Returns the
    eligible layouts best first.
    """
    request = Request(scenario, tuple(overrides), tuple(vary), tuple(search), layouts, objective,
                      top, rerank, goodput, dict(constraints or {}), contention, gpus,
                      tuple(options))
    execution = Execution(jobs, backend, ray_address, None if out is None else Path(out),
                          progress, replicas, results)
    return frame(execute(request, execution))
