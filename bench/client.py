"""Python-side HTTP work: namespaces, filling a server with Events, reading lists page by page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from bench.events import event_body
from bench.processes import Target, insecure_context

FILL_CONCURRENCY = 32


def session(target: Target, connections: int = FILL_CONCURRENCY) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(ssl=insecure_context(), limit=connections)
    headers = {"Authorization": f"Bearer {target.token}"}
    return aiohttp.ClientSession(target.url, connector=connector, headers=headers)


async def ensure_namespaces(target: Target, names: list[str]) -> None:
    """kube-apiserver admits nothing into a namespace it does not have; coreio standalone has all."""
    if target.name != "kube-apiserver":
        return
    async with session(target) as http:
        for name in names:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            async with http.post("/api/v1/namespaces", json=body) as response:
                if response.status not in (201, 409):
                    raise RuntimeError(f"namespace {name}: {response.status} {await response.text()}")


async def fill(target: Target, namespace: str, prefix: str, count: int) -> None:
    """Creates `count` Events named `<prefix>-<i>` in `namespace`; any answer but 201 is fatal."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(count):
        queue.put_nowait(index)
    path = target.events_path(namespace)

    async def worker(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            index = queue.get_nowait()
            body = event_body(target.group_version, namespace, f"{prefix}-{index}")
            async with http.post(path, data=json.dumps(body), headers=_JSON) as response:
                if response.status != 201:
                    raise RuntimeError(f"{target.name} create: {response.status} {await response.text()}")

    async with session(target) as http:
        await asyncio.gather(*(worker(http) for _ in range(FILL_CONCURRENCY)))


_JSON = {"Content-Type": "application/json"}


async def get_json(http: aiohttp.ClientSession, path: str) -> dict[str, Any]:
    async with http.get(path) as response:
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {await response.text()}")
        answer: dict[str, Any] = await response.json()
        return answer


async def stored_json_size(target: Target, namespace: str | None = None) -> tuple[int, int]:
    """(objects, bytes): the Events listed in pages of 500, each counted as compact JSON."""
    count = size = 0
    token = ""
    base = target.events_path(namespace)
    async with session(target, 1) as http:
        while True:
            page = await get_json(http, f"{base}?limit=500" + (f"&continue={token}" if token else ""))
            for item in page["items"]:
                count += 1
                size += len(json.dumps(item, separators=(",", ":")).encode())
            token = page["metadata"].get("continue", "")
            if not token:
                return count, size


async def list_revision(target: Target, namespace: str) -> str:
    async with session(target, 1) as http:
        page = await get_json(http, f"{target.events_path(namespace)}?limit=1")
        return str(page["metadata"]["resourceVersion"])


async def warm_up(target: Target) -> int:
    """One LIST of every Event, unpaged, read to the end; its size in bytes."""
    async with session(target, 1) as http, http.get(target.events_path(None)) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"LIST {target.name}: {response.status} {body[:300]!r}")
        return len(body)
