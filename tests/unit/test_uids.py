"""UIDs and Audit-IDs (machinery/uids.py): RFC 4122 version 4 text, never repeated, and never the
same in two forked workers (the pool of random bytes is emptied in the child); and the current
second as metav1.Time, formatted once a second (machinery/objectmeta.py)."""

from __future__ import annotations

import datetime
import os
import uuid

from apiserver.machinery import objectmeta, uids


def test_a_uid_is_a_random_uuid_in_canonical_text() -> None:
    text = uids.new()
    parsed = uuid.UUID(text)
    assert parsed.version == 4
    assert parsed.variant == uuid.RFC_4122
    assert str(parsed) == text


def test_uids_do_not_repeat_past_the_pool() -> None:
    drawn = [uids.new() for _ in range(10_000)]  # 160,000 bytes: the pool is drawn again 39 times
    assert len(set(drawn)) == len(drawn)


def test_a_forked_worker_draws_its_own_uids() -> None:
    uids.new()  # the parent's pool holds bytes a child would copy
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next uids, to the parent
        os.close(read_end)
        os.write(write_end, " ".join(uids.new() for _ in range(5)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as child:
        theirs = set(child.read().decode().split())
    os.waitpid(pid, 0)
    ours = {uids.new() for _ in range(5)}
    assert len(theirs) == 5
    assert not ours & theirs


def test_the_current_second_reads_as_metav1_time() -> None:
    """objectmeta.now_text, formatted once a second: the second it is called in (or the next)."""
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    text = objectmeta.now_text()
    after = datetime.datetime.now(datetime.UTC)
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert before <= moment <= after
    assert objectmeta.now_text() in {text, objectmeta.format_time(datetime.datetime.now(datetime.UTC))}
