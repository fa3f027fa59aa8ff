"""What the cluster install tests share: a stream of aggregated requests that counts every failure
(for rotations and restarts that must not drop one)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

from tests.support.controlplane import ControlPlane


class AggregatedTraffic:
    """Requests through kube-apiserver to coreio, one after the other, on fresh connections."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.ok = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        context = self.plane.ssl_context()
        url = f"{self.plane.url}/apis/events.core.io/v1/namespaces/default/events?limit=1"
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(url, context=context, timeout=10) as response:
                    response.read()
                    self.ok += 1
            except (urllib.error.URLError, OSError) as exc:
                body = (
                    exc.read().decode(errors="replace")[:300]
                    if isinstance(exc, urllib.error.HTTPError)
                    else ""
                )
                self.failures.append(f"{time.strftime('%X')} {exc} {body}")
            time.sleep(0.05)  # the traffic's pace

    def __enter__(self) -> AggregatedTraffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
