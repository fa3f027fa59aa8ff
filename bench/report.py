"""The results: rows of figures per server, ratios against kube-apiserver, the issue's targets, the
markdown table and the plot."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field

COREIO_ETCD = "coreio (etcd)"
COREIO_SQLITE = "coreio (sqlite)"
KUBE = "kube-apiserver"
ETCD_RAW = "etcd txn (aetcd)"
COLUMNS = (COREIO_ETCD, COREIO_SQLITE, KUBE, ETCD_RAW)
COREIOS = (COREIO_ETCD, COREIO_SQLITE)
RSS_LIMIT = 2.5
READY_LIMIT = 2.0
LIST_FACTOR = 2.0  # LISTs were met at 1.43x kube-apiserver: the target was raised (issue 24)
SAME_LOAD = 0.9  # a watch fan-out's write rate, as a share of kube-apiserver's, to compare latencies

CREATE = "create"
CREATE_GENERATED = "create (generateName)"
CREATES = (CREATE, CREATE_GENERATED)
GET = "GET one Event"
# The same loads with each coreio restarted on --workers=1 (two by default on 2 cores): the scaling
# per core. Their kube-apiserver column is its figure of the section above.
ONE_WORKER = ", 1 coreio worker"
LIST_ALL = "LIST all namespaces"
LIST_NS = "LIST one namespace"
LIST_PAGE = "LIST page of 500"
LISTS = (LIST_ALL, LIST_NS, LIST_PAGE)
WATCH = "watch fan-out"


def watch_section(rate: float) -> str:
    return f"{WATCH} at {rate:.0f}/s"


MEMORY = "memory"
READY = "start to /readyz 200"
FRESH = "(empty)"
RESTART = "(restart with the Events above)"


@dataclass
class Row:
    section: str
    metric: str  # rate, p50, p99, lost, written, rss, json, rss/json, ready, restart
    unit: str  # /s, s, B, x, n
    connections: int | None = None
    values: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        where = f" c={self.connections}" if self.connections is not None else ""
        return f"{self.section}{where} {self.metric}"

    def ratio(self, column: str) -> float | None:
        """coreio's figure over kube-apiserver's (None when either is missing or kube's is 0)."""
        mine, theirs = self.values.get(column), self.values.get(KUBE)
        if mine is None or not theirs:
            return None
        return mine / theirs


@dataclass(frozen=True)
class Verdict:
    target: str
    met: dict[str, bool | None]  # per coreio column; None: not measured
    detail: dict[str, str]


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "/s":
        return f"{value:,.0f}/s" if value >= 100 else f"{value:.1f}/s"
    if unit == "s":
        return f"{value * 1000:,.1f} ms" if value < 10 else f"{value:,.1f} s"
    if unit == "B":
        return f"{value / 2**20:,.1f} MiB"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.0f}"


def fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def rows_of(rows: list[Row], sections: tuple[str, ...], metric: str) -> list[Row]:
    return [row for row in rows if row.section in sections and row.metric == metric]


def rows_of_section(rows: list[Row], section: str) -> list[Row]:
    return [row for row in rows if row.section == section]


def at_least_kube(
    rows: list[Row], sections: tuple[str, ...], column: str, factor: float = 1.0
) -> tuple[bool | None, str]:
    """Whether every throughput of `sections` is at least `factor` times kube-apiserver's; the
    worst ratio."""
    ratios = [(ratio, row) for row in rows_of(rows, sections, "rate") if (ratio := row.ratio(column))]
    if not ratios:
        return None, "not measured"
    worst, row = min(ratios, key=lambda pair: pair[0])
    return worst >= factor, f"worst {worst:.2f}x ({row.section} c={row.connections})"


def watch_sections(rows: list[Row]) -> list[str]:
    return list(dict.fromkeys(row.section for row in rows if row.section.startswith(WATCH)))


def watch_verdict(rows: list[Row], column: str) -> tuple[bool | None, str]:
    """p99 at most kube-apiserver's and nothing lost, at every rate measured."""
    met: bool | None = None
    details = []
    for section in watch_sections(rows):
        p99, lost, written = (rows_of(rows, (section,), metric)[0] for metric in ("p99", "lost", "written"))
        if column not in p99.values or KUBE not in p99.values:
            continue
        mine, theirs, missing = p99.values[column], p99.values[KUBE], lost.values.get(column, 0)
        # Latencies compare only at the same load: coreio must write as fast as kube-apiserver did.
        behind = (written.ratio(column) or 0.0) < SAME_LOAD
        met = (met is not False) and mine <= theirs and missing == 0 and not behind
        rate = section.removeprefix(f"{WATCH} at ")
        wrote = f", wrote {fmt(written.values.get(column), '/s')} vs {fmt(written.values[KUBE], '/s')}"
        details.append(f"{rate}: p99 {fmt(mine, 's')} vs {fmt(theirs, 's')}, {missing:.0f} lost{wrote}")
    return met, "; ".join(details) or "not measured"


def rss_verdict(rows: list[Row], column: str) -> tuple[bool | None, str]:
    ratio = next(iter(rows_of(rows, (MEMORY,), "rss/json")), None)
    if ratio is None or column not in ratio.values:
        return None, "not measured"
    value = ratio.values[column]
    return value <= RSS_LIMIT, f"RSS {value:.2f}x the stored JSON"


def ready_verdict(rows: list[Row], column: str) -> tuple[bool | None, str]:
    """Every start (empty, and restarted with Events stored) within READY_LIMIT."""
    found = [(row.metric, row.values[column]) for row in rows_of_section(rows, READY) if column in row.values]
    if not found:
        return None, "not measured"
    detail = ", ".join(f"{value:.2f} s {metric.strip('()').split(' with')[0]}" for metric, value in found)
    return max(value for _, value in found) <= READY_LIMIT, detail


def verdicts(rows: list[Row]) -> list[Verdict]:
    checks: list[tuple[str, Callable[[str], tuple[bool | None, str]]]] = [
        ("creates ≥ 1.0x kube-apiserver", lambda c: at_least_kube(rows, CREATES, c)),
        ("GET ≥ 1.0x kube-apiserver", lambda c: at_least_kube(rows, (GET,), c)),
        (f"LIST ≥ {LIST_FACTOR:.1f}x kube-apiserver", lambda c: at_least_kube(rows, LISTS, c, LIST_FACTOR)),
        ("watch p99 ≤ kube-apiserver's, 0 lost", lambda c: watch_verdict(rows, c)),
        (f"RSS ≤ {RSS_LIMIT}x stored JSON", lambda c: rss_verdict(rows, c)),
        (f"ready ≤ {READY_LIMIT:.0f} s", lambda c: ready_verdict(rows, c)),
    ]
    found = []
    for target, check in checks:
        results = {column: check(column) for column in COREIOS}
        found.append(
            Verdict(target, {c: r[0] for c, r in results.items()}, {c: r[1] for c, r in results.items()})
        )
    return found


def figures_table(rows: list[Row]) -> list[str]:
    head = ["measurement", *COLUMNS, f"{COREIO_ETCD} / kube", f"{COREIO_SQLITE} / kube"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [fmt(row.values.get(column), row.unit) for column in COLUMNS]
        ratios = [fmt_ratio(row.ratio(column)) for column in COREIOS]
        lines.append("| " + " | ".join([row.label, *cells, *ratios]) + " |")
    return lines


def mark(met: bool | None) -> str:
    return {True: "met", False: "NOT met", None: "not measured"}[met]


def verdict_table(found: list[Verdict]) -> list[str]:
    lines = [f"| target | {COREIO_ETCD} | {COREIO_SQLITE} |", "|---|---|---|"]
    for verdict in found:
        cells = [f"{mark(verdict.met[c])}: {verdict.detail[c]}" for c in COREIOS]
        lines.append(f"| {verdict.target} | " + " | ".join(cells) + " |")
    return lines


def to_json(rows: list[Row]) -> str:
    """The rows as JSON (results.json), to compare runs or render them again."""
    return json.dumps([dataclasses.asdict(row) for row in rows], indent=1)


def from_json(text: str) -> list[Row]:
    return [Row(**row) for row in json.loads(text)]


def markdown(rows: list[Row], heading: str, note: str = "") -> str:
    """The figures, then the targets of the issue with whether each is met."""
    head = [f"## {heading}", "", *([note, ""] if note else [])]
    parts = [*head, *figures_table(rows), "", "### Targets", "", *verdict_table(verdicts(rows))]
    return "\n".join(parts) + "\n"
