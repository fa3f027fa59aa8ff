"""Running wrk and reading its `--latency` report: rate, p50 and p99, errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"
THREADS = 2
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_RATE_UNITS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_PERCENTILE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", re.MULTILINE)
_RATE = re.compile(r"^Requests/sec:\s+([\d.]+)([kMG]?)\s*$", re.MULTILINE)
_REQUESTS = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h)", re.MULTILINE)
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


class WrkMissing(RuntimeError):
    """wrk is not installed."""


@dataclass(frozen=True)
class WrkResult:
    rate: float  # requests per second
    p50: float  # seconds
    p99: float  # seconds
    requests: int
    errors: int  # answers other than 2xx/3xx, and socket errors (timeouts included)


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise WrkMissing("wrk is not on PATH: install it with `apt-get install wrk`")
    return found


def seconds(value: str, unit: str) -> float:
    """wrk's durations: 812.00us, 5.23ms, 1.02s, 1.50m."""
    return float(value) * _TIME_UNITS[unit]


def per_second(value: str, suffix: str) -> float:
    """wrk's rates: 3050.12, 1.53k, 2.10M."""
    return float(value) * _RATE_UNITS[suffix]


def parse(output: str) -> WrkResult:
    """The figures of wrk's report (run with --latency)."""
    rate = _RATE.search(output)
    if rate is None:
        raise ValueError(f"no Requests/sec in wrk's output:\n{output}")
    percentiles = {int(m.group(1)): seconds(m.group(2), m.group(3)) for m in _PERCENTILE.finditer(output)}
    if 50 not in percentiles or 99 not in percentiles:
        raise ValueError(f"no latency distribution in wrk's output (run it with --latency):\n{output}")
    requests = _REQUESTS.search(output)
    socket_errors = _SOCKET_ERRORS.search(output)
    non_2xx = _NON_2XX.search(output)
    errors = sum(int(n) for n in socket_errors.groups()) if socket_errors else 0
    errors += int(non_2xx.group(1)) if non_2xx else 0
    return WrkResult(
        rate=per_second(rate.group(1), rate.group(2)),
        p50=percentiles[50],
        p99=percentiles[99],
        requests=int(requests.group(1)) if requests else 0,
        errors=errors,
    )


def run(url: str, connections: int, duration: float, script: str, args: list[str]) -> WrkResult:
    """wrk -t2 -cN -dD --latency against `url` with a script of bench/scripts and its arguments."""
    command = [
        wrk_binary(),
        f"-t{min(THREADS, connections)}",
        f"-c{connections}",
        f"-d{max(1, round(duration))}s",
        "--timeout",
        "60s",
        "--latency",
        "-s",
        str(SCRIPTS / script),
        url,
        "--",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=duration + 120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr}{done.stdout}")
    if done.stderr.strip():
        print(f"    wrk: {done.stderr.strip()[:600]}")
    return parse(done.stdout)
