"""What one measurement yields, and percentiles."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    rate: float  # per second
    p50: float  # seconds
    p99: float  # seconds
    errors: int = 0


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile; 0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]
