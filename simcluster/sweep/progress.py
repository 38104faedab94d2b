"""A progress line for long sweeps: points done of total, percent, rate and ETA, on stderr.

On a terminal the line is rewritten in place (``\\r``, at most every ``tty_interval_s``); on a file
or pipe a line is written at most every ``interval_s`` (5 s) and a final line at :meth:`close`.
Never stdout: stdout belongs to the tables and ``--json``. The rate and ETA count only the points
computed by this run (points found stored at start, :meth:`Progress.resume`, are done but not
part of the rate). The clock is injected, so tests need no sleeping.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import TextIO


def clock_text(seconds: float) -> str:
    """``seconds`` as ``h:mm:ss`` (hours unbounded); ``-:--:--`` when unknown (inf or NaN)."""
    if not math.isfinite(seconds):
        return "-:--:--"
    whole = max(0, math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Points done / total, percent, points/s and ETA, written to ``stream`` (stderr by default).

    Parameters
    ----------
    total_points : int
        Points in the whole sweep (stored ones included).
    stream : TextIO | None
        Where the line goes; ``sys.stderr`` when None.
    label : str
        Text before the counts, e.g. ``"analytical"``.
    clock : Callable[[], float]
        Monotonic seconds (``time.monotonic``); tests pass a fake one.
    interval_s : float
        Least seconds between two lines when ``stream`` is not a terminal.
    tty_interval_s : float
        Least seconds between two rewrites of the line on a terminal.
    """

    def __init__(self, total_points: int, stream: TextIO | None = None, label: str = "", *,
                 clock: Callable[[], float] = time.monotonic, interval_s: float = 5.0,
                 tty_interval_s: float = 0.2) -> None:
        self.total = total_points
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        self.clock = clock
        self.tty = _isatty(self.stream)
        self.interval_s = tty_interval_s if self.tty else interval_s
        self.done = 0  # points done, stored ones included
        self.computed = 0  # points computed by this run: the rate's numerator
        self.start_s = clock()
        self._last_s = self.start_s
        self._width = 0  # length of the line on the terminal, to blank a longer previous one
        self._closed = False

    def resume(self, points: int) -> None:
        """Count ``points`` found already stored as done, outside the rate."""
        self.done += points

    def advance(self, points: int) -> None:
        """Count ``points`` computed by this run; write the line if it is time to."""
        self.done += points
        self.computed += points
        now = self.clock()
        if now - self._last_s >= self.interval_s:
            self._last_s = now
            self._write(self.line(now))

    def close(self) -> None:
        """Write the final line (and end it, on a terminal); later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        self._write(self.line(self.clock(), final=True))
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()

    def line(self, now: float, *, final: bool = False) -> str:
        """The progress text at clock time ``now``."""
        elapsed = max(now - self.start_s, 0.0)
        rate = self.computed / elapsed if elapsed > 0 else math.nan
        percent = 100.0 * self.done / self.total if self.total else 100.0
        prefix = f"{self.label}: " if self.label else ""
        counts = f"{prefix}{self.done:,}/{self.total:,} points ({percent:.1f}%)"
        speed = f"{rate:,.1f} points/s" if math.isfinite(rate) else "- points/s"
        if final:
            return f"{counts} {speed}, {clock_text(elapsed)} elapsed"
        remaining = max(self.total - self.done, 0)
        eta = remaining / rate if rate > 0 else (0.0 if remaining == 0 else math.inf)
        return f"{counts} {speed} ETA {clock_text(eta)}"

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a terminal
        return False
