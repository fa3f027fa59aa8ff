"""Fixtures shared across the suite: real etcd, real kubectl/helm, the real server process; and
soak tests (marked `soak`) skipped unless `-m soak` selects them."""

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.support.etcd",
    "tests.support.tools",
    "tests.support.server",
    "tests.support.kubectl",
    "tests.support.api",
    "tests.support.controlplane",
    "tests.support.aggregation",
]

# No example is timed: this machine's speed moves by half within a day, and speed is measured in
# bench/, side by side with the alternative, never by a test's clock. Hypothesis' default deadline
# (200 ms an example) and its too_slow check (one fails when the first draw builds its table of
# Unicode characters in a fresh checkout on a busy machine) would fail a run for the machine's sake.
settings.register_profile("coreio", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("coreio")


def soak_selected(config: pytest.Config) -> bool:
    """Whether the run's `-m` names the soak marker (`pytest -m soak`)."""
    return "soak" in str(config.getoption("markexpr", ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak tests, and the soak variants of parametrized ones, run on demand only."""
    if soak_selected(config):
        return
    on_demand = pytest.mark.skip(reason="on demand: pytest -m soak")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(on_demand)
