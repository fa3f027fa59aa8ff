"""One PNG per run: throughput by connections for each request kind, and watch delivery latency."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from bench.report import COLUMNS, COREIOS, CREATE, GET, KUBE, LISTS, WATCH, Row, rows_of, watch_sections

SECTIONS = (CREATE, GET, *LISTS)


def throughput(axes: Axes, rows: list[Row], section: str) -> None:
    found = rows_of(rows, (section,), "rate")
    for column in COLUMNS:
        points = [(row.connections or 0, row.values[column]) for row in found if column in row.values]
        if points:
            axes.plot([c for c, _ in points], [v for _, v in points], marker="o", label=column)
    axes.set_title(section, fontsize=10)
    axes.set_xscale("log", base=2)
    ticks = sorted({row.connections or 0 for row in found})
    axes.set_xticks(ticks, [str(tick) for tick in ticks])
    axes.set_xlabel("connections")
    axes.set_ylabel("requests/s")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=7)


def watch_latency(axes: Axes, rows: list[Row]) -> None:
    """p99 delivery latency per server, one group of bars per rate asked."""
    sections = watch_sections(rows)
    columns = [*COREIOS, KUBE]
    width = 0.8 / max(1, len(columns))
    for offset, column in enumerate(columns):
        values = [rows_of(rows, (s,), "p99")[0].values.get(column, 0.0) for s in sections]
        axes.bar([i + offset * width for i in range(len(sections))], values, width=width, label=column)
    labels = [s.removeprefix(f"{WATCH} at ") + " asked" for s in sections]
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(sections))], labels, fontsize=8)
    axes.set_yscale("log")
    axes.set_title(f"{WATCH}: p99 delivery latency (s, log)", fontsize=10)
    axes.legend(fontsize=7)


def plot(rows: list[Row], path: Path, title: str) -> None:
    figure, grid = plt.subplots(2, 3, figsize=(16, 9))
    cells = list(grid.flat)
    for axes, section in zip(cells, SECTIONS, strict=False):
        throughput(axes, rows, section)
    watch_latency(cells[len(SECTIONS)], rows)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
