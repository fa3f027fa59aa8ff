"""The POST itself: a batch of events as one audit.k8s.io/v1 EventList, to the server URL of the
kubeconfig's current context, with its CA and client certificate or token (read by the cluster
connection's own loader), each attempt within 30 seconds (upstream's webhook request timeout)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml

from apiserver.audit.webhook.backoff import Backoff, DeliveryError, with_backoff
from apiserver.cluster.connection import ClusterConnection, load_kubeconfig

REQUEST_TIMEOUT = 30.0
# Upstream's client counts 200 to 206 as success; anything else is an error, and retried.
_SUCCESS = range(200, 207)


class WebhookConfigError(Exception):
    """The webhook's kubeconfig could not be read or used."""


@dataclass(frozen=True)
class EncodedEvent:
    """One event as the JSON the log wrote, and its audit ID (to name it when it is lost)."""

    audit_id: str
    line: str

    @property
    def size(self) -> int:
        return len(self.line.encode())


def event_list(events: Sequence[EncodedEvent]) -> bytes:
    """The body: the events, already JSON, as the items of an EventList."""
    items = ",".join(event.line for event in events)
    return f'{{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{{}},"items":[{items}]}}'.encode()


def webhook_connection(config_file: str) -> ClusterConnection:
    """The service the kubeconfig at `config_file` names; WebhookConfigError when it cannot."""
    try:
        return load_kubeconfig(Path(config_file))
    except FileNotFoundError:
        raise WebhookConfigError(f"stat {config_file}: no such file or directory") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise WebhookConfigError(f"{config_file}: {exc}") from None


class WebhookClient:
    """POSTs EventLists to one service, retrying each as `backoff` says."""

    def __init__(self, connection: ClusterConnection, backoff: Backoff) -> None:
        self.connection = connection
        self.backoff = backoff
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                headers={"User-Agent": "coreio-apiserver", "Accept": "application/json"},
            )
        return self._session

    async def send(self, events: Sequence[EncodedEvent]) -> None:
        """The events delivered; DeliveryError (the last attempt's) when every attempt failed."""
        body = event_list(events)
        await with_backoff(lambda: self.post(body), self.backoff)

    async def post(self, body: bytes) -> None:
        """One attempt."""
        url = self.connection.server
        try:
            headers = {"Content-Type": "application/json", **self.connection.headers()}
            async with self._client().post(
                url, data=body, headers=headers, ssl=self.connection.ssl_context
            ) as answer:
                text = await answer.text(errors="replace")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise DeliveryError(f"Post {url!r}: {type(exc).__name__}: {exc}") from exc
        if answer.status not in _SUCCESS:
            raise DeliveryError(f"Post {url!r}: {answer.status} {answer.reason}: {text[:200]}")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
