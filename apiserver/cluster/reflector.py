"""list+watch of one cluster resource into memory, as client-go's reflector and informer keep it.

A `Reflector` lists the resource page by page, then watches from the list's resourceVersion,
relisting when the cluster answers 410 Gone and backing off (with jitter) when it cannot be reached
or anything else fails (a fault of ours included: logged with its traceback, then listed again,
never left stale).
Objects are kept by (namespace, name) after `parse` turned them into what the caller works on;
`synced` is set once the first list is in, and `on_change` callbacks run after every change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Generic, TypeVar

import aiohttp

from apiserver.cluster.connection import ClusterConnection
from apiserver.machinery.tasks import BackgroundTasks
from apiserver.machinery.types import JSON

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = tuple[str, str]


class WatchExpired(Exception):
    """The cluster answered 410 Gone: the resourceVersion is too old; relist."""


class NotFound(Exception):
    """The cluster answered 404 Not Found."""


def object_key(obj: JSON) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class ClusterReader:
    """GETs and watch streams against the cluster with one connection's credentials."""

    def __init__(self, connection: ClusterConnection, *, request_timeout: float = 30.0) -> None:
        self.connection = connection
        self.request_timeout = request_timeout
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"User-Agent": "coreio-apiserver", "Accept": "application/json"}
            )
        return self._session

    def _url(self, path: str, query: Mapping[str, str]) -> str:
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.connection.server}{path}{suffix}"

    async def get_json(self, path: str, query: Mapping[str, str] | None = None) -> JSON:
        """One object; NotFound on 404, WatchExpired on 410, ValueError on any other failure."""
        async with self._client().get(
            self._url(path, query or {}),
            headers=self.connection.headers(),
            ssl=self.connection.ssl_context,
            timeout=aiohttp.ClientTimeout(total=self.request_timeout),
        ) as response:
            text = await response.text()
            _raise_for_status(response.status, f"GET {path}", text)
            body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError(f"GET {path}: answer is no object")
        return body

    async def stream(self, path: str, query: Mapping[str, str], idle: float) -> AsyncIterator[JSON]:
        """The events of one watch request, one JSON object a line, until the server ends it."""
        # No total timeout: the server ends the watch (timeoutSeconds); a silent peer is caught by
        # the read timeout (bookmarks and events keep a healthy watch talking).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout, sock_read=idle)
        async with self._client().get(
            self._url(path, query),
            headers=self.connection.headers(),
            ssl=self.connection.ssl_context,
            timeout=timeout,
        ) as response:
            if response.status != 200:
                _raise_for_status(response.status, f"watch {path}", await response.text())
            async for event in _json_lines(response.content):
                yield event

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _raise_for_status(status: int, what: str, text: str) -> None:
    if status == 404:
        raise NotFound(what)
    if status == 410:
        raise WatchExpired()
    if status != 200:
        raise ValueError(f"{what}: {status} {text[:300]}")


async def _json_lines(content: aiohttp.StreamReader) -> AsyncIterator[JSON]:
    # Lines can be longer than aiohttp's readline limit (big ClusterRoles): split them here.
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end].strip(), buffer[end + 1 :]
            if line and isinstance(event := json.loads(line), dict):
                yield event
    if buffer.strip() and isinstance(event := json.loads(buffer), dict):
        yield event


class Reflector(Generic[T]):
    """One resource of the cluster (a collection path such as `/api/v1/namespaces`) in memory."""

    def __init__(
        self,
        reader: ClusterReader,
        path: str,
        parse: Callable[[JSON], T | None],
        *,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.reader = reader
        self.path = path
        self.parse = parse
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.items: dict[Key, T] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.on_change: list[Callable[[], None]] = []
        self._tasks = BackgroundTasks()  # run(), from start() to stop()

    def start(self) -> None:
        if not self._tasks.started:
            self._tasks.start(self.run(), name=f"coreio-reflector {self.path}")

    async def stop(self) -> None:
        await self._tasks.stop()

    async def run(self) -> None:
        backoff = self.min_backoff
        while True:
            try:
                await self._list()
                backoff = self.min_backoff
                while True:
                    await self._watch()
            except WatchExpired:
                log.info("%s: resourceVersion %s expired; relisting", self.path, self.resource_version)
                continue
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError, NotFound) as exc:
                log.warning("%s: %s: %s; retrying in %.1fs", self.path, type(exc).__name__, exc, backoff)
            except Exception:  # a fault of ours (parsing an object, say): a dead task would go stale
                log.exception("%s: unexpected error; listing again in %.1fs", self.path, backoff)
            await asyncio.sleep(backoff * (1 + random.random() / 2))
            backoff = min(backoff * 2, self.max_backoff)

    async def _list(self) -> None:
        items: dict[Key, T] = {}
        token = ""
        while True:
            query = {"limit": str(self.page_size)}
            if token:
                query["continue"] = token
            body = await self.reader.get_json(self.path, query)
            for obj in body.get("items") or []:
                if isinstance(obj, dict) and (item := self.parse(obj)) is not None:
                    items[object_key(obj)] = item
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                self.resource_version = str(meta.get("resourceVersion") or "")
                break
        self.items = items
        self.synced.set()
        self._changed()

    async def _watch(self) -> None:
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(int(self.watch_timeout * (1 + random.random()))),
        }
        async for event in self.reader.stream(self.path, query, idle=self.watch_timeout * 2 + 30):
            self._apply(str(event.get("type") or ""), event.get("object"))

    def _apply(self, kind: str, obj: object) -> None:
        if not isinstance(obj, dict):
            return
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise WatchExpired()
            raise ValueError(f"watch error: {obj.get('message', obj)}")
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "DELETED":
            self.items.pop(object_key(obj), None)
            self._changed()
        elif kind in ("ADDED", "MODIFIED") and (item := self.parse(obj)) is not None:
            self.items[object_key(obj)] = item
            self._changed()
        if version:
            self.resource_version = version

    def _changed(self) -> None:
        for callback in self.on_change:
            try:
                callback()
            except Exception:
                log.exception("%s: change callback failed", self.path)
