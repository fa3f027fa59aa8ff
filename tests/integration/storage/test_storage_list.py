"""Range reads: prefixes, snapshots at a revision, pagination and its remaining counts."""

from __future__ import annotations

import pytest

from apiserver.storage.interface import CompactedError, FutureRevisionError, Storage


def keys(result: object) -> list[str]:
    return [item.key for item in result.items]  # type: ignore[attr-defined]


async def test_list_is_the_prefix_in_key_order(store: Storage) -> None:
    for key in ["/r/ns2/b", "/r/ns1/b", "/r/ns1/a", "/r/ns10/a", "/s/ns1/a", "/r/ns1"]:
        await store.create(key, key.encode())
    result = await store.list("/r/ns1/")
    assert keys(result) == ["/r/ns1/a", "/r/ns1/b"]
    assert [item.value for item in result.items] == [b"/r/ns1/a", b"/r/ns1/b"]
    assert keys(await store.list("/r/")) == ["/r/ns1", "/r/ns1/a", "/r/ns1/b", "/r/ns10/a", "/r/ns2/b"]
    assert result.more is False and result.remaining == 0


async def test_list_at_revision_zero_is_the_current_state(store: Storage) -> None:
    await store.create("/r/a", b"1")
    deleted = await store.create("/r/b", b"1")
    await store.delete("/r/b", expected_revision=deleted.mod_revision)
    result = await store.list("/r/")
    assert keys(result) == ["/r/a"]
    assert result.revision == await store.current_revision()


async def test_list_at_a_past_revision_is_a_snapshot(store: Storage) -> None:
    unrelated = await store.create("/unrelated", b"x")
    a = await store.create("/r/a", b"a1")
    b = await store.create("/r/b", b"b1")
    snapshot = await store.current_revision()
    await store.update("/r/a", b"a2", expected_revision=a.mod_revision)
    await store.delete("/r/b", expected_revision=b.mod_revision)
    await store.create("/r/c", b"c1")

    past = await store.list("/r/", revision=snapshot)
    assert past.revision == snapshot
    assert [(i.key, i.value, i.mod_revision) for i in past.items] == [
        ("/r/a", b"a1", a.mod_revision),
        ("/r/b", b"b1", b.mod_revision),
    ]
    now = await store.list("/r/")
    assert [(i.key, i.value) for i in now.items] == [("/r/a", b"a2"), ("/r/c", b"c1")]
    before_anything = await store.list("/r/", revision=unrelated.mod_revision)
    assert before_anything.items == []


async def test_pages_keep_the_first_page_snapshot(store: Storage) -> None:
    created = {}
    for name in "abcde":
        created[name] = await store.create(f"/r/{name}", name.encode())
    await store.create("/r0/x", b"outside the prefix")

    first = await store.list("/r/", limit=2)
    assert keys(first) == ["/r/a", "/r/b"]
    assert (first.more, first.remaining) == (True, 3)

    # Changes after the first page must not show in later pages of the same list.
    await store.update("/r/c", b"changed", expected_revision=created["c"].mod_revision)
    await store.delete("/r/d")
    await store.create("/r/bb", b"new")

    second = await store.list("/r/", start=first.items[-1].key + "\0", limit=2, revision=first.revision)
    assert second.revision == first.revision
    assert keys(second) == ["/r/c", "/r/d"]
    assert second.items[0].value == b"c"
    assert (second.more, second.remaining) == (True, 1)

    third = await store.list("/r/", start=second.items[-1].key + "\0", limit=2, revision=first.revision)
    assert keys(third) == ["/r/e"]
    assert (third.more, third.remaining) == (False, 0)

    fresh = await store.list("/r/", limit=10)
    assert keys(fresh) == ["/r/a", "/r/b", "/r/bb", "/r/c", "/r/e"]
    assert (fresh.more, fresh.remaining) == (False, 0)


async def test_limit_equal_to_the_count_has_no_more(store: Storage) -> None:
    for name in "abc":
        await store.create(f"/r/{name}", b"x")
    result = await store.list("/r/", limit=3)
    assert keys(result) == ["/r/a", "/r/b", "/r/c"]
    assert (result.more, result.remaining) == (False, 0)


async def test_an_uncounted_page_is_the_same_page(store: Storage) -> None:
    """counted=False (the watch cache's fill) gives the same keys and `more`; `remaining` is 0 or
    the count, as the backend finds cheaper."""
    for name in "abcde":
        await store.create(f"/r/{name}", b"x")
    counted = await store.list("/r/", limit=2)
    uncounted = await store.list("/r/", limit=2, revision=counted.revision, counted=False)
    assert keys(uncounted) == keys(counted) == ["/r/a", "/r/b"]
    assert uncounted.more and uncounted.revision == counted.revision
    assert uncounted.remaining in (0, counted.remaining) and counted.remaining == 3


async def test_start_is_inclusive(store: Storage) -> None:
    for name in "abc":
        await store.create(f"/r/{name}", b"x")
    assert keys(await store.list("/r/", start="/r/b")) == ["/r/b", "/r/c"]
    assert keys(await store.list("/r/", start="/")) == ["/r/a", "/r/b", "/r/c"]
    assert keys(await store.list("/r/", start="/r/z")) == []
    assert keys(await store.list("/r/", start="/s")) == []


async def test_end_is_exclusive_and_pages_within_it(store: Storage) -> None:
    for name in ["a", "b", "c", "d", "e"]:
        await store.create(f"/r/{name}", b"x")
    await store.create("/s/a", b"outside the prefix")
    assert keys(await store.list("/r/", end="/r/c")) == ["/r/a", "/r/b"]
    assert keys(await store.list("/r/", start="/r/b", end="/r/d")) == ["/r/b", "/r/c"]
    # An end past the prefix's own end is the prefix's end.
    assert keys(await store.list("/r/", start="/r/d", end="/t")) == ["/r/d", "/r/e"]
    page = await store.list("/r/", start="/r/b", end="/r/e", limit=2)
    assert keys(page) == ["/r/b", "/r/c"] and page.more and page.remaining == 1
    last = await store.list("/r/", start="/r/d", end="/r/e", limit=2, revision=page.revision)
    assert keys(last) == ["/r/d"] and not last.more


async def test_future_revision_is_refused(store: Storage) -> None:
    await store.create("/r/a", b"x")
    current = await store.current_revision()
    with pytest.raises(FutureRevisionError) as caught:
        await store.list("/r/", revision=current + 100)
    assert caught.value.requested == current + 100
    assert caught.value.current >= current


async def test_continuing_a_list_after_compaction_fails(isolated_store: Storage) -> None:
    store = isolated_store
    for name in "abcd":
        await store.create(f"/r/{name}", b"x")
    first = await store.list("/r/", limit=2)
    await store.delete("/r/c")
    await store.create("/r/e", b"x")
    compact_to = await store.current_revision()
    await store.compact(compact_to)
    with pytest.raises(CompactedError) as caught:
        await store.list("/r/", start=first.items[-1].key + "\0", limit=2, revision=first.revision)
    assert caught.value.requested == first.revision
    assert caught.value.compacted == compact_to
