"""How fast batches may go: a token bucket as client-go's flowcontrol limiter (golang.org/x/time/rate
underneath), `qps` tokens a second and at most `burst` saved up, starting full."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """Each batch takes a token; when none is left it waits for the one it reserved."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Takes a token: the seconds until it is due (0: at once). Tokens run negative, so that
        reservations queue up in order, as rate.Limiter's do."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps
