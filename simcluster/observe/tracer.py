"""Tracers: where a simulation's spans go. ``NullTracer`` drops them, ``ChromeTracer`` keeps them.

Chrome trace event format (the JSON that ui.perfetto.dev and chrome://tracing load): complete
spans are ``X`` events with ``ts``/``dur`` in microseconds, process and thread names are ``M``
metadata events, counters are ``C`` events, instants are ``i``. Here
``pid`` is a pipeline stage (of one replica class) and ``tid`` a stream.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

_US = 1e6  # seconds -> microseconds (Chrome trace timestamps)


class Tracer(Protocol):
    """What the simulator may tell an observer. Every method returns ``None``."""

    def name_process(self, pid: int, name: str, sort_index: int) -> None:
        """Label a process row (a pipeline stage)."""

    def name_thread(self, pid: int, tid: int, name: str) -> None:
        """Label a thread row (a stream) inside a process."""

    def span(self, pid: int, tid: int, name: str, start_s: float, end_s: float,
             category: str, args: dict[str, Any] | None = None) -> None:
        """A complete interval ``[start_s, end_s]`` on one row."""

    def instant(self, pid: int, tid: int, name: str, at_s: float) -> None:
        """A point event."""


class NullTracer:
    """Discards everything (the default)."""

    def name_process(self, pid: int, name: str, sort_index: int) -> None:
        """Do nothing."""

    def name_thread(self, pid: int, tid: int, name: str) -> None:
        """Do nothing."""

    def span(self, pid: int, tid: int, name: str, start_s: float, end_s: float,
             category: str, args: dict[str, Any] | None = None) -> None:
        """Do nothing."""

    def instant(self, pid: int, tid: int, name: str, at_s: float) -> None:
        """Do nothing."""


class ChromeTracer:
    """Collects Chrome trace events in memory; :meth:`to_json` or :meth:`write` them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def name_process(self, pid: int, name: str, sort_index: int) -> None:
        """``M`` events ``process_name`` and ``process_sort_index``."""
        self.events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                            "args": {"name": name}})
        self.events.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index",
                            "args": {"sort_index": sort_index}})

    def name_thread(self, pid: int, tid: int, name: str) -> None:
        """``M`` events ``thread_name`` and ``thread_sort_index`` (rows ordered by tid)."""
        self.events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                            "args": {"name": name}})
        self.events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                            "args": {"sort_index": tid}})

    def span(self, pid: int, tid: int, name: str, start_s: float, end_s: float,
             category: str, args: dict[str, Any] | None = None) -> None:
        """An ``X`` event, microseconds."""
        event: dict[str, Any] = {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": category,
                                 "ts": start_s * _US, "dur": (end_s - start_s) * _US}
        if args:
            event["args"] = args
        self.events.append(event)

    def instant(self, pid: int, tid: int, name: str, at_s: float) -> None:
        """An ``i`` event scoped to its thread."""
        self.events.append({"ph": "i", "pid": pid, "tid": tid, "name": name, "s": "t",
                            "ts": at_s * _US})

    def to_json(self) -> str:
        """The trace as Chrome's JSON object format (``traceEvents`` + ``displayTimeUnit``)."""
        return json.dumps({"traceEvents": self.events, "displayTimeUnit": "ms"},
                          separators=(",", ":"))

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` whole or not at all; returns the path."""
        return write_text_atomic(path, self.to_json())


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path``, then rename it over ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are ordinary readable files
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
