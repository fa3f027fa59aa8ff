"""Fixtures shared across the suite: real etcd, real kubectl/helm, the real server process."""

pytest_plugins = [
    "tests.support.etcd",
    "tests.support.tools",
    "tests.support.server",
    "tests.support.kubectl",
    "tests.support.api",
    "tests.support.controlplane",
    "tests.support.aggregation",
]
