"""Fuzz the command line in-process: mutated shipped scenarios and topologies, and hostile flags.

Every call of ``simcluster.cli.main`` must end within ``BUDGET_S`` seconds and ``MEMORY_CAP_BYTES``
of fresh address space, and exit 0 (with output) or 2 (the last line of stderr is the one-line
error); never 1, never an exception, never a traceback. The mutations are described in
``fuzz_strategies``; the examples are biased towards cheap scenarios (``--fast``, few replicas, one
or two nodes) so that the file stays fast: 1,000 examples in all.
"""

from __future__ import annotations

import contextlib
import io
import re
import resource
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from simcluster.cli import main
from simcluster.perf.collectives import OPS
from tests.property.fuzz_strategies import FILE, ROOT, Case, base_doc, corrupted, key_paths, mutated, typo

#: Wall-clock budget of one CLI call, in seconds.
BUDGET_S = 10.0
#: Address space one CLI call may add to the test process.
MEMORY_CAP_BYTES = 4 * 2**30

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
TOPOLOGIES = sorted((ROOT / "topologies").glob("*.yaml"))
# 2,048 nodes: ~1 s per run unmutated, ~3 s with --contention on
EXPENSIVE = {"llama3-405b-16k-h100.yaml", "degraded-links.yaml"}
CHEAP = [p for p in SCENARIOS if p.name not in EXPENSIVE]
CHEAP_DES = [ROOT / "scenarios" / n for n in ("default.yaml", "straggler-gpu.yaml",
                                              "oversubscribed-spine.yaml", "gpt-10b-4x3090ti.yaml")]
RELIABLE = [ROOT / "scenarios" / n for n in ("default.yaml", "1k-h100-reliability.yaml")]
ERROR_LINE = re.compile(r"^simcluster( [a-z]+)*: error: \S")
# No shrinking: every attempt on a hang costs BUDGET_S, and a failing example is already short (one
# to three mutations, listed in the failure message). Examples are derandomised under the ci profile.
FUZZ = settings(deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


class Overtime(BaseException):
    """Raised by the timer inside a CLI call (a BaseException, so ``except Exception`` lets it by)."""


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: stopped by the timer or raised
    out: str
    err: str
    seconds: float
    raised: str | None = None  # the exception that escaped main, if any


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Overtime


def _address_space() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * resource.getpagesize()


@contextlib.contextmanager
def _memory_cap() -> Iterator[None]:
    """Cap the address space at its current size plus ``MEMORY_CAP_BYTES`` (Linux only)."""
    used = _address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = used + MEMORY_CAP_BYTES
    if not used or (hard != resource.RLIM_INFINITY and hard < cap):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def call(argv: list[str]) -> Outcome:
    """``main(argv)`` with stdout and stderr captured, under the time and memory budgets."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    code: int | None = None
    start = time.perf_counter()
    try:
        # The timer fires again every second: an Overtime swallowed (raised inside a __del__, say)
        # does not let the call run on unbounded.
        signal.setitimer(signal.ITIMER_REAL, BUDGET_S, 1.0)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _memory_cap():
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse rejects a flag
                code = exit_.code if isinstance(exit_.code, int) else 1
    except Overtime:
        code = None
    except Exception as exc:  # escaped main: a failure, reported by problem()
        raised = f"{type(exc).__name__}: {exc}"[:500]
        return Outcome(None, out.getvalue(), err.getvalue(), time.perf_counter() - start, raised)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def problem(outcome: Outcome) -> str | None:
    """What is wrong with a call's outcome, or None."""
    if outcome.raised is not None:
        return f"raised {outcome.raised}"
    if outcome.code is None or outcome.seconds > BUDGET_S:
        return f"took longer than {BUDGET_S:g} s"
    if "Traceback" in outcome.err:
        return f"printed a traceback (exit {outcome.code})"
    if outcome.code not in (0, 2):
        return f"exit status {outcome.code}, expected 0 or 2"
    if outcome.code == 0 and not outcome.out:
        return "exit 0 with nothing on stdout"
    lines = outcome.err.splitlines()
    if outcome.code == 2 and not (lines and ERROR_LINE.match(lines[-1])):
        return "exit 2 without a final 'simcluster: error: ...' line on stderr"
    return None


def run_case(case: Case, workdir: Path) -> tuple[list[str], Outcome]:
    """Write the case's file, call the CLI on it, return the argv and the outcome."""
    path = workdir / "mutant.yaml"
    path.write_bytes(case.content)
    argv = [str(path) if a == FILE else a for a in case.argv]
    return argv, call(argv)


def check(case: Case, workdir: Path) -> None:
    argv, outcome = run_case(case, workdir)
    note(f"file:\n{case.content.decode(errors='replace')[:4000]}")
    wrong = problem(outcome)
    assert wrong is None, (f"simcluster {' '.join(argv)}: {wrong}\nmutations: {'; '.join(case.steps)}\n"
                           f"stderr:\n{outcome.err[-3000:]}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ------------------------------------------------------------------------------- the commands


def _case(argv: tuple[str, ...], file: tuple[bytes, tuple[str, ...]]) -> Case:
    return Case(argv, *file)


def validate_cases() -> st.SearchStrategy[Case]:
    return st.builds(_case, st.just(("validate", FILE)), mutated(SCENARIOS))


def run_cases(fast: bool) -> st.SearchStrategy[Case]:
    flags = st.tuples(st.sampled_from([(), ("--json",)]),
                      st.sampled_from([(), ("--contention", "off"), ("--contention", "on")]))
    argv = flags.map(lambda f: ("run", FILE, *(("--fast",) if fast else ()), *f[0], *f[1]))
    return st.builds(_case, argv, mutated(CHEAP if fast else CHEAP_DES, max_steps=2,
                                          focus=("parallelism", "training", "reliability", "checkpoint")))


def reliability_cases() -> st.SearchStrategy[Case]:
    argv = st.tuples(st.sampled_from(["1", "2", "3"]), st.sampled_from([(), ("--engine", "simpy")]),
                     st.sampled_from([(), ("--json",), ("--interval-sweep", "20:40:20")]),
                     st.sampled_from([(), ("--seed", "7")])).map(
        lambda f: ("reliability", FILE, "--replicas", f[0], *f[1], *f[2], *f[3]))
    return st.builds(_case, argv, mutated(RELIABLE, reliability=True, max_steps=2,
                                          focus=("reliability", "checkpoint", "training")))


def topology_cases() -> st.SearchStrategy[Case]:
    collective = st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["A", "B"]),
                           st.sampled_from(["1M", "1K:1M", "0"]), st.sampled_from(OPS)).map(
        lambda f: ("collective", "--topology", FILE, "--nodes", f[0], "--tier", f[1], "--bytes", f[2],
                   "--op", f[3]))
    show = st.sampled_from([(), ("--json",), ("--dot",)]).map(
        lambda f: ("topology", "show", FILE, "--nodes", "2", *f))
    return st.builds(_case, st.one_of(collective, show), mutated(TOPOLOGIES))


def corrupted_cases() -> st.SearchStrategy[Case]:
    scenario = st.sampled_from([("validate", FILE), ("run", FILE, "--fast"),
                                ("reliability", FILE, "--replicas", "2")])
    topology = st.sampled_from([("collective", "--topology", FILE, "--bytes", "1M"),
                                ("topology", "show", FILE)])
    return st.one_of(st.builds(_case, scenario, corrupted(RELIABLE)),
                     st.builds(_case, topology, corrupted(TOPOLOGIES)))


# --------------------------------------------------------------------------------- hostile flags

COUNTS = ("0", "-1", "1", "2", "64", "10000", "100000", "100000000", "1e3", "2.5", "abc", "", str(2**70))
SIZES = ("0", "1", "1M", "8G", "1K:1G", "1e40", "1E", "inf", "nan", "-1", "1K:1e30", "0:1M", "8G:1K",
         "1P", "1e-9", "1:2:3", ":", str(2**70))
SWEEPS = ("20:40:20", "0:0:0", "1:1:1", "0.001:1000:0.001", "1:1e9:1e6", "nan:nan:nan", "inf:inf:1",
          "1e-9:1e-9:1", "1:2", "5:60:5")
YAML_VALUES = ("0", "-1", "nan", ".inf", "1e40", "1e9", "[1]", "{a: 1}", "abc", "", "'", "null",
               "!!python/object:os.system", "4194304")


@st.composite
def set_items(draw: st.DrawFn) -> str:
    """A ``--set KEY=VALUE`` item: a real or misspelt key path of the default scenario, a hostile value."""
    paths = [p for p in key_paths(base_doc(ROOT / "scenarios" / "default.yaml", resolved=True))
             if all(isinstance(k, str) for k in p)]
    keys = [str(k) for k in draw(st.sampled_from(paths))]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(keys) - 1))
        keys[i] = draw(typo(keys[i]))
    key = draw(st.sampled_from([".".join(keys), "", "a..b", ".".join(keys) + "."]))
    return f"{key}{draw(st.sampled_from(['=', '=', '']))}{draw(st.sampled_from(YAML_VALUES))}"


def _with_one(sane: dict[str, str | None],
              hostile: dict[str, Sequence[str]]) -> st.SearchStrategy[tuple[str, ...]]:
    """Flags: the sane ones, one or two of them replaced by a hostile value (None: flag left out)."""

    def argv(choice: dict[str, str | None]) -> tuple[str, ...]:
        return tuple(a for flag, value in choice.items() if value is not None for a in (flag, value))

    replaced = st.lists(st.sampled_from(list(hostile)), min_size=1, max_size=2, unique=True).flatmap(
        lambda flags: st.fixed_dictionaries({f: st.sampled_from(hostile[f]) for f in flags}))
    return replaced.map(lambda r: argv({**sane, **r}))


def flag_cases() -> st.SearchStrategy[Case]:
    topo = ("dgx-h100", "gb200-nvl72", "box-4x3090ti-nvlink", "dgx-h10", FILE)
    collective = _with_one(
        {"--topology": "dgx-h100", "--nodes": "1", "--gpus": None, "--bytes": "1M", "--tier": "A",
         "--op": "all_reduce", "--algo": "auto"},
        {"--topology": topo, "--nodes": COUNTS, "--gpus": COUNTS, "--bytes": SIZES, "--tier": ("B",),
         "--op": (*OPS, "allreduce", "all_reduce "), "--algo": ("ring", "tree", "nvls", "rings")})
    show = _with_one({"--nodes": "1"}, {"--nodes": COUNTS, "--json": ("",)})
    reliability = _with_one({"--replicas": "2", "--seed": None, "--interval-sweep": None},
                            {"--replicas": COUNTS, "--seed": ("0", "-1", str(2**70), "abc"),
                             "--interval-sweep": SWEEPS})
    sets = st.tuples(st.sampled_from([("validate",), ("run", "--fast"), ("reliability", "--replicas", "2")]),
                     st.lists(set_items(), min_size=1, max_size=2)).map(
        lambda f: (f[0][0], FILE, *f[0][1:], *(a for s in f[1] for a in ("--set", s))))
    reliable = (ROOT / "scenarios" / "1k-h100-reliability.yaml").read_bytes()
    topology = TOPOLOGIES[0].read_bytes()
    return st.one_of(st.builds(Case, collective.map(lambda a: ("collective", *a)), st.just(topology),
                               st.just(())),
                     st.builds(Case, st.tuples(st.sampled_from(topo), show).map(
                         lambda t: ("topology", "show", t[0], *(a for a in t[1] if a))), st.just(topology),
                         st.just(())),
                     st.builds(Case, reliability.map(lambda a: ("reliability", FILE, *a)), st.just(reliable),
                               st.just(())),
                     st.builds(Case, sets, st.just(reliable), st.just(())))


def failure_range_cases() -> st.SearchStrategy[Case]:
    """``reliability`` on the 1k-H100 scenario at the Weibull shapes, failure rates and other
    failure sources that once hung or crashed it (issue 25): each must end in bounded time with a
    result or a one-line error."""
    values = {"inter_arrival": ("weibull", "exponential"),
              "weibull_shape": ("0.001", "0.02", "0.1", "0.3", "1", "3", "20", "25"),
              "failure_rate_per_node_day": ("0", "1e-300", "1e-19", "1e-12", "3.79e-3", "1", "1e6"),
              "infant_mortality": ("true", "false"), "job_failures_per_day": ("0", "0.5", "1e9"),
              "lemon_fraction": ("0", "0.012", "0.5", "2"), "lemon_multiplier": ("1", "226", "1e9"),
              "stragglers_per_node_day": ("0", "0.05", "1e6"),
              "straggler_degrades.what": ("gpu", "node", "scale_out", "scale_up", "nic"),
              "straggler_eviction": ("graceful", "crash"), "elastic": ("true", "false"),
              "preset": ("rsc1", "rsc2", "llama3-405b", "rsc3")}
    sets = st.lists(st.sampled_from(list(values)), min_size=1, max_size=4, unique=True).flatmap(
        lambda keys: st.tuples(*(st.sampled_from(values[k]).map(
            lambda v, k=k: ("--set", f"reliability.{k}={v}")) for k in keys)))
    reliable = (ROOT / "scenarios" / "1k-h100-reliability.yaml").read_bytes()
    argv = sets.map(lambda pairs: ("reliability", FILE, "--replicas", "2", "--fast",
                                   *(a for pair in pairs for a in pair)))
    return st.builds(Case, argv, st.just(reliable), st.just(()))


# ---------------------------------------------------------------------------------------- tests


@settings(FUZZ, max_examples=30)
@given(failure_range_cases())
def test_reliability_survives_failure_ranges(workdir: Path, case: Case) -> None:
    check(case, workdir)



@settings(FUZZ, max_examples=200)
@given(validate_cases())
def test_validate_survives_mutated_scenarios(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=200)
@given(run_cases(fast=True))
def test_run_fast_survives_mutated_scenarios(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=120)
@given(run_cases(fast=False))
def test_run_des_survives_mutated_scenarios(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=150)
@given(reliability_cases())
def test_reliability_survives_mutated_scenarios(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=120)
@given(topology_cases())
def test_collective_and_topology_survive_mutated_topologies(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=60)
@given(corrupted_cases())
def test_every_command_survives_corrupted_files(workdir: Path, case: Case) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=150)
@given(flag_cases())
def test_every_command_survives_hostile_flags(workdir: Path, case: Case) -> None:
    check(case, workdir)
