"""A whole retention run (`collect_events`) over a fake client that pages synthetic Events and
records deletes, for what a real server makes slow to show (the real runs are in
tests/integration/test_event_retention.py and on the real node): the run decides exactly as
`select_victims` does, a page at a time; its memory does not grow with the number of Events; it
stops at maxDeletesPerRun."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta

from apiserver.machinery.objectmeta import format_micro_time
from apiserver.machinery.types import JSON
from apiserver_operator.retention import collect_events, select_victims
from apiserver_operator.spec import EventRetention

NOW = datetime(2030, 5, 17, 12, 0, 0, tzinfo=UTC)


def _event(index: int, namespace: str) -> JSON:
    age = timedelta(seconds=(index * 7919) % 7200)  # up to two hours, spread
    return {
        "metadata": {
            "name": f"event-{index:07d}-{'x' * 40}",
            "namespace": namespace,
            "uid": f"00000000-0000-4000-8000-{index:012d}",
            "resourceVersion": str(100000 + index),
        },
        "eventTime": format_micro_time(NOW - age),
        "type": "Warning" if index % 4 == 1 else "Normal",
        "reason": "Synced",
        "note": "n" * 200,
    }


class FakePagingClient:
    """Events made as they are paged (the fake holds one byte per Event: whether it is deleted),
    deletes recorded by name too when `keep_names`."""

    def __init__(self, count: int, namespaces: int, *, keep_names: bool = True) -> None:
        self.count, self.namespaces, self.keep_names = count, namespaces, keep_names
        self.gone = bytearray(count)
        self.deleted: list[str] = []
        self.deletes = 0

    def _namespace(self, index: int) -> str:
        return f"ns-{index % self.namespaces}"

    async def list_pages(self, path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[JSON]:
        size = int((params or {})["limit"])
        only = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else ""
        page: list[JSON] = []
        for index in range(self.count):
            namespace = self._namespace(index)
            if (only and namespace != only) or self.gone[index]:
                continue
            page.append(_event(index, namespace))
            if len(page) == size:
                yield {"items": page}
                page = []
        yield {"items": page}

    async def delete(self, path: str, options: JSON | None = None) -> bool:
        name = path.rsplit("/", 1)[1]
        index = int(name.split("-")[1])
        if self.gone[index]:
            return False  # a 404: gone already
        self.gone[index], self.deletes = 1, self.deletes + 1
        if self.keep_names:
            self.deleted.append(name)
        return True


POLICY = EventRetention(max_age="1h", warning_max_age="90m", max_per_namespace=300, max_deletes_per_run=10**6)


async def test_the_run_deletes_what_the_policy_selects() -> None:
    fake = FakePagingClient(6000, namespaces=4)
    report = await collect_events(fake, POLICY, NOW)  # type: ignore[arg-type]
    everything = [_event(i, fake._namespace(i)) for i in range(6000)]
    expected = select_victims(everything, POLICY, NOW)
    assert sorted(fake.deleted) == sorted(v.name for v in expected)
    assert report.examined == 6000
    assert report.deleted_by_age == sum(v.rule == "age" for v in expected)
    assert report.deleted_by_count == sum(v.rule == "count" for v in expected) > 0
    assert not report.capped


async def _peak_mib(count: int) -> float:
    fake = FakePagingClient(count, namespaces=20, keep_names=False)
    tracemalloc.start()
    try:
        await collect_events(fake, POLICY, NOW)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fake.deletes > count // 3
    return peak / 2**20


async def test_memory_does_not_grow_with_the_number_of_events() -> None:
    """Ten times the Events, the same peak: a page, the per-namespace counts and one namespace's
    heap of `maxPerNamespace` ranks, never the cluster's Events."""
    small, large = await _peak_mib(4_000), await _peak_mib(40_000)
    print(f"\nretention run peak (tracemalloc): {small:.1f} MiB at 4,000 Events, {large:.1f} MiB at 40,000")
    assert large < small * 1.5 + 1, (small, large)


async def test_a_run_stops_at_its_cap_and_says_so() -> None:
    fake = FakePagingClient(6000, namespaces=4)
    capped = EventRetention(max_age="1h", max_per_namespace=300, max_deletes_per_run=1000)
    report = await collect_events(fake, capped, NOW)  # type: ignore[arg-type]
    assert fake.deletes == report.deleted == 1000
    assert report.capped and report.status()["capped"] is True
    assert report.examined < 6000  # it stopped listing too
