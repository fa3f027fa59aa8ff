"""The benchmark's parts that need no process: reading wrk's report, ratios, the issue's targets."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import processes, scale, wrk
from bench.options import parse as parse_options
from bench.report import (
    COREIO_ETCD,
    COREIO_SQLITE,
    CREATE,
    FRESH,
    GET,
    KUBE,
    LIST_ALL,
    MEMORY,
    READY,
    Row,
    fmt,
    from_json,
    markdown,
    to_json,
    verdicts,
    watch_section,
)
from bench.stats import percentile
from bench.watchers import Watch, summary
from tests.support.waiting import wait_until
from tests.unit.test_code_shape import long_functions

ROOT = Path(__file__).resolve().parents[2]

WRK_REPORT = """Running 10s test @ https://127.0.0.1:40123/apis/events.core.io/v1/namespaces/list/events
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     7.41ms    2.10ms  48.20ms   91.02%
    Req/Sec     1.09k   101.22     1.31k    72.50%
  Latency Distribution
     50%    6.98ms
     75%    7.80ms
     90%    9.12ms
     99%   15.31ms
  21702 requests in 10.01s, 35.62MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:   2168.06
Transfer/sec:      3.56MB
"""


def test_wrk_report_gives_rate_percentiles_and_errors() -> None:
    result = wrk.parse(WRK_REPORT)
    assert result.rate == pytest.approx(2168.06)
    assert result.p50 == pytest.approx(0.00698)
    assert result.p99 == pytest.approx(0.01531)
    assert result.requests == 21702
    assert result.errors == 2 + 3 + 4


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [("812.00", "us", 812e-6), ("5.23", "ms", 0.00523), ("1.02", "s", 1.02), ("1.50", "m", 90.0)],
)
def test_wrk_durations_carry_their_unit(value: str, unit: str, expected: float) -> None:
    assert wrk.seconds(value, unit) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "suffix", "expected"), [("3050.12", "", 3050.12), ("1.53", "k", 1530.0), ("2.10", "M", 2.1e6)]
)
def test_wrk_rates_carry_their_suffix(value: str, suffix: str, expected: float) -> None:
    assert wrk.per_second(value, suffix) == pytest.approx(expected)


def test_a_slow_run_in_seconds_and_a_k_rate_parse() -> None:
    report = re.sub(r"50%\s+6.98ms", "50%    1.20s", WRK_REPORT)
    report = report.replace("99%   15.31ms", "99%  812.00us").replace("2168.06", "1.53k")
    report = report.replace("  Socket errors: connect 0, read 2, write 0, timeout 3\n", "")
    result = wrk.parse(report)
    assert result.p50 == pytest.approx(1.2)
    assert result.p99 == pytest.approx(812e-6)
    assert result.rate == pytest.approx(1530.0)
    assert result.errors == 4


def test_wrk_report_without_latency_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="--latency"):
        wrk.parse(WRK_REPORT.split("  Latency Distribution")[0] + "Requests/sec:   10.00\n")


def rate_row(section: str, connections: int, etcd: float, sqlite: float, kube: float) -> Row:
    return Row(section, "rate", "/s", connections, {COREIO_ETCD: etcd, COREIO_SQLITE: sqlite, KUBE: kube})


def test_ratio_is_coreio_over_kube_apiserver() -> None:
    row = rate_row(CREATE, 16, 500.0, 1000.0, 800.0)
    assert row.ratio(COREIO_ETCD) == pytest.approx(0.625)
    assert row.ratio(COREIO_SQLITE) == pytest.approx(1.25)
    assert Row(CREATE, "rate", "/s", 1, {COREIO_ETCD: 5.0}).ratio(COREIO_ETCD) is None
    assert Row(CREATE, "rate", "/s", 1, {COREIO_ETCD: 5.0, KUBE: 0.0}).ratio(COREIO_ETCD) is None


def verdict_of(rows: list[Row], target: str) -> tuple[bool | None, bool | None]:
    found = next(v for v in verdicts(rows) if v.target.startswith(target))
    return found.met[COREIO_ETCD], found.met[COREIO_SQLITE]


def test_throughput_targets_need_every_connection_count_at_least_kube() -> None:
    rows = [rate_row(CREATE, 1, 900.0, 1100.0, 1000.0), rate_row(CREATE, 64, 2000.0, 1500.0, 1500.0)]
    rows += [rate_row(GET, 16, 3000.0, 3000.0, 2000.0), rate_row(LIST_ALL, 16, 30.0, 40.0, 20.0)]
    assert verdict_of(rows, "creates") == (False, True)
    assert verdict_of(rows, "GET") == (True, True)
    # LISTs must reach twice kube-apiserver's rate: 1.5x is not enough.
    assert verdict_of(rows, "LIST") == (False, True)
    detail = next(v for v in verdicts(rows) if v.target.startswith("creates")).detail[COREIO_ETCD]
    assert detail == "worst 0.90x (create c=1)"


def test_creates_with_generated_names_count_toward_the_creates_target() -> None:
    from bench.events import generated_name_template
    from bench.report import CREATE_GENERATED

    body = json.loads(generated_name_template("events.core.io/v1", "create"))
    assert body["metadata"] == {"generateName": "bench-", "namespace": "create"}
    rows = [
        rate_row(CREATE, 16, 1100.0, 1100.0, 1000.0),
        rate_row(CREATE_GENERATED, 16, 800.0, 1200.0, 1000.0),
    ]
    assert verdict_of(rows, "creates") == (False, True)


def test_watch_target_needs_p99_at_most_kube_and_nothing_lost() -> None:
    section = watch_section(1000)
    rows = [
        Row(section, "written", "/s", values={COREIO_ETCD: 950.0, COREIO_SQLITE: 1000.0, KUBE: 1000.0}),
        Row(section, "p99", "s", values={COREIO_ETCD: 0.05, COREIO_SQLITE: 0.04, KUBE: 0.06}),
        Row(section, "lost", "n", values={COREIO_ETCD: 0.0, COREIO_SQLITE: 3.0, KUBE: 0.0}),
    ]
    assert verdict_of(rows, "watch") == (True, False)
    rows[1].values[COREIO_ETCD] = 0.07
    assert verdict_of(rows, "watch")[0] is False


def test_watch_latency_at_a_lower_write_rate_than_kube_does_not_count() -> None:
    section = watch_section(1000)
    rows = [
        Row(section, "written", "/s", values={COREIO_ETCD: 80.0, KUBE: 800.0}),
        Row(section, "p99", "s", values={COREIO_ETCD: 0.05, KUBE: 6.0}),
        Row(section, "lost", "n", values={COREIO_ETCD: 0.0, KUBE: 0.0}),
    ]
    assert verdict_of(rows, "watch")[0] is False


def test_memory_and_ready_targets() -> None:
    rows = [
        Row(MEMORY, "rss/json", "x", values={COREIO_ETCD: 2.4, COREIO_SQLITE: 2.6}),
        Row(READY, FRESH, "s", values={COREIO_ETCD: 1.9, COREIO_SQLITE: 2.1, KUBE: 3.0}),
    ]
    assert verdict_of(rows, "RSS") == (True, False)
    assert verdict_of(rows, "ready") == (True, False)


def test_unmeasured_targets_say_so() -> None:
    assert all(v.met == {COREIO_ETCD: None, COREIO_SQLITE: None} for v in verdicts([]))


def test_markdown_has_a_row_per_figure_with_ratios_and_the_targets() -> None:
    text = markdown([rate_row(GET, 16, 3000.0, 1500.0, 2000.0)], "run")
    assert "| GET one Event c=16 rate | 3,000/s | 1,500/s | 2,000/s | - | 1.50x | 0.75x |" in text
    assert "| GET ≥ 1.0x kube-apiserver | met: worst 1.50x (GET one Event c=16) |" in text
    assert "NOT met: worst 0.75x" in text


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [(0.0123, "s", "12.3 ms"), (12.5, "s", "12.5 s"), (3 * 2**20, "B", "3.0 MiB"), (1234.4, "/s", "1,234/s")],
)
def test_figures_are_shown_in_their_unit(value: float, unit: str, shown: str) -> None:
    assert fmt(value, unit) == shown


def test_watchers_note_each_event_once_and_count_what_they_missed() -> None:
    watch = Watch(re.compile(rb'"name":"w1-(\d+|end)"'))
    line = '{"type":"ADDED","object":{"metadata":{"name":"w1-%s"},"regarding":{"name":"subject-0"}}}\n'
    watch.feed(((line % 0) + (line % 1)).encode(), 100.0)
    watch.feed(((line % 1) + (line % "end")).encode(), 101.0)
    assert watch.received == {0: 100.0, 1: 100.0}
    assert watch.ended.is_set()
    got = summary([watch], {0: 99.5, 1: 100.5, 2: 100.6})
    assert (got["lost"], got["deliveries"]) == (1, 2)
    assert got["p99"] == pytest.approx(0.5)  # 1 arrived before its acknowledgement: latency 0


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([float(i) for i in range(100)], 0.99) == 99.0


def test_quick_scales_down() -> None:
    quick, full = parse_options(["--quick"]), parse_options([])
    assert (quick.duration, quick.rss_objects, quick.list_objects) == (2.0, 2000, 1000)
    assert (full.duration, full.rss_objects, full.list_objects) == (10.0, 100_000, 10_000)
    assert full.connections == (1, 16, 64)
    assert full.out.parent == ROOT / "bench" / "results"


def test_the_scale_curve_goes_to_a_million_and_refuses_counts_out_of_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = scale.parse([])
    assert default.counts == (100_000, 1_000_000) and default.duration == 10.0
    assert default.out.parent == ROOT / "bench" / "results" and default.out.name.startswith("scale-")
    assert default.loads("1,16").connections == (1, 16) and default.loads("16").duration == 10.0
    with pytest.raises(SystemExit) as refused:
        scale.parse(["--events", "1000000,100000"])
    assert refused.value.code == 2
    assert "counts must be positive and ascending" in capsys.readouterr().err


def test_a_scale_top_up_runs_wrk_about_as_long_as_the_missing_events_need() -> None:
    assert scale.top_up_seconds(30_000, 3_000.0) == 9.5  # a little under: the next run adds the rest
    assert scale.top_up_seconds(10, 3_000.0) == 2.0  # wrk counts whole seconds
    assert scale.top_up_seconds(10_000_000, 3_000.0) == 120.0  # the count is checked between runs
    assert scale.top_up_seconds(1_000_000, None) == 5.0  # the rate not known yet: a short first run
    assert scale.top_up_seconds(500, 0.0) == 120.0  # no rate measured: a bounded run, not a division by 0


def test_no_bench_function_is_longer_than_60_lines() -> None:
    assert long_functions(ROOT / "bench") == []


def test_rows_survive_json_and_small_rates_keep_a_decimal() -> None:
    rows = [rate_row(LIST_ALL, 64, 2.6, 0.45, 4.0)]
    assert from_json(to_json(rows)) == rows
    assert fmt(2.6, "/s") == "2.6/s"


def test_memory_and_cpu_count_a_server_with_its_workers() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        wait_until(lambda: child.pid in processes.tree(os.getpid()), message="the child in the tree")
        alone = processes.rss_bytes(child.pid)
        assert alone > 0 and processes.rss_bytes(os.getpid()) > alone
    finally:
        child.kill()
        child.wait()


def test_a_profile_summary_counts_each_function_once_a_stack() -> None:
    from bench.profile import summary

    raw = (
        "run (a/server.py:10);handle (b/handlers.py:5);handle (b/handlers.py:9);encode (c/codec.py:3) 3\n"
        "run (a/server.py:10);select (selectors.py:1) 1\n"
        "garbage line\n"
    )
    lines = summary(raw).splitlines()
    assert lines[0] == "4 samples"
    inclusive = lines[lines.index("-- with what it calls") + 1 : lines.index("-- own")]
    assert inclusive == [
        "100.0%  run (server.py)",
        " 75.0%  encode (codec.py)",
        " 75.0%  handle (handlers.py)",  # counted once, though twice in its stack
        " 25.0%  select (selectors.py)",
    ]
    own = lines[lines.index("-- own") + 1 :]
    assert own == [" 75.0%  encode (codec.py)", " 25.0%  select (selectors.py)"]


def test_coreio_servers_start_from_compiled_bytecode_as_an_installed_coreio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A machine with PYTHONDONTWRITEBYTECODE set would have every benchmarked start compile each
    module of the source tree; an installed coreio reads bytecode pip wrote. The servers' environment
    reads it from the source tree's __pycache__, filled before the first start."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = processes.installed_like()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    source = Path(processes.__file__).resolve().parent.parent / "apiserver" / "server.py"
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import importlib.util; print(importlib.util.cache_from_source({str(source)!r}))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert "PYTHONPYCACHEPREFIX" not in env and Path(where).is_file(), where


def test_the_otlp_http_end_reads_both_exporters_records(tmp_path: Path) -> None:
    """coreio-export's log records (protobuf, the Event in attributes) and the collector's
    k8sobjects receiver's (JSON, the watch event as a kvlist body), posted to its process, stamped
    by Event name alike."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

    from bench.sinks import OtlpHttpEnd

    attributes = {
        "k8s.event.name": "ours",
        "k8s.namespace.name": "ns",
        "log.record.uid": "u/7",
        "k8s.event.resource_version": "7",
    }
    record = LogRecord(
        attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()]
    )
    ours = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[record])])]
    )

    def kv(**values: object) -> dict[str, object]:
        return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in values.items()]}}

    metadata = kv(name={"stringValue": "theirs"}, resourceVersion={"stringValue": "8"})
    body = kv(type={"stringValue": "ADDED"}, object=kv(metadata=metadata))
    theirs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": body}]}]}]}
    end = OtlpHttpEnd(tmp_path)
    try:
        post(f"{end.url}/v1/logs", ours.SerializeToString(), "application/x-protobuf")
        post(f"{end.url}/v1/logs", json.dumps(theirs).encode(), "application/json")
        wait_until(lambda: len(end.received_at()) == 2, timeout=5, message=lambda: str(end.received_at()))
        assert end.received_at()["ours"] <= end.received_at()["theirs"]
        assert end.seen == [("ADDED", "theirs")]
        assert end.records()[0]["dedupKey"] == "u/7"
    finally:
        end.stop()


def test_the_k8sobjects_collectors_main_is_the_one_its_go_sum_was_made_for() -> None:
    """bench/k8sobjects/go.sum pins the modules this main imports (tests.support.otelcol_build's
    template with the k8sobjects receiver): a change of the template must come with a new go.sum."""
    import hashlib

    from bench.k8sobjects import MAIN

    digest = hashlib.sha256(MAIN.encode()).hexdigest()
    assert digest == "78e307a22e1ea4050312e058ba9153ea33cb188051bed5be194d98c4a783c855"


def test_the_kubernetes_event_exporter_end_counts_each_event_posted_to_it(tmp_path: Path) -> None:
    """kubernetes-event-exporter posts one Event's JSON a request: each receipt kept (the same
    Event twice, after a restart's relist, is a duplicate), the first one stamped."""
    from bench.kee import EventReceiver

    end = EventReceiver(tmp_path)
    try:
        for name in ("a", "b", "a"):
            body = json.dumps({"kind": "Event", "metadata": {"name": name, "namespace": "ns"}}).encode()
            post(end.url, body, "application/json")
        wait_until(lambda: end.names() == ["a", "b", "a"], timeout=5, message=lambda: str(end.names()))
        assert set(end.received_at()) == {"a", "b"}
    finally:
        end.stop()


def test_the_export_table_says_when_kubernetes_event_exporter_was_not_run() -> None:
    from bench.export import KEE, NOT_RUN, Row, table

    ours = Row("sqlite", "webhook", 1000.0, 0.09, 0.2, 0, 0)
    theirs = Row("kube-apiserver", "webhook", 0.0, 0.001, 0.02, 3, 609, KEE, (5, 20))
    assert NOT_RUN in table([ours])
    shown = table([ours, theirs])
    assert NOT_RUN not in shown
    assert (
        "| kubernetes-event-exporter v1.6.1 | kube-apiserver | webhook | none: 5 of the 20 written while"
        " stopped never sent | 1.0 ms | 20 ms | 3 | 609 |"
    ) in shown


def post(url: str, body: bytes, kind: str) -> None:
    import urllib.request

    request = urllib.request.Request(url, body, {"Content-Type": kind})
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200


def test_the_receiving_ends_file_gives_whole_requests_only() -> None:
    """A request whose body is not yet wholly written is left for the next read; the offsets
    given let the reader go on from the end of the last whole one."""
    from bench.receiving import frames

    first = b'[1.5,"application/json",2]\n{}'
    second = b'[2.5,"application/x-protobuf",3]\n\n\x00\n'
    assert frames(first + second[:-1]) == [(1.5, "application/json", b"{}", len(first))]
    assert frames(first + second)[1] == (2.5, "application/x-protobuf", b"\n\x00\n", len(second))
    assert frames(b'[3.0,"a",5]') == []


def test_the_webhook_end_takes_each_record_of_a_batch_with_the_time_its_request_was_read(
    tmp_path: Path,
) -> None:
    from bench.sinks import WebhookEnd

    end = WebhookEnd(tmp_path)
    end.start()
    try:
        batch = [{"dedupKey": f"u/{i}", "event": {"metadata": {"name": f"e{i}"}}} for i in range(3)]
        post(end.target()["webhook"]["url"], json.dumps(batch).encode(), "application/json")
        wait_until(lambda: len(end.records()) == 3, timeout=5, message=lambda: str(end.records()))
        assert len(set(end.received_at().values())) == 1
    finally:
        end.stop()
