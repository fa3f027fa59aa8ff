"""Builds the OpenTelemetry Collector the OTLP sink's tests send to, from Go modules, once, and
caches it (as etcd and kube-apiserver are built: tests.support.gobuild).

It is the upstream collector (`otelcol`) with the components a test needs and no more: the OTLP
receiver (gRPC and HTTP, as every collector deployment has) and the OTLP/HTTP exporter, which the
tests point at a receiver of their own with `encoding: json`, so that what the collector took in is
read back as OTLP JSON. Its main is what the collector's builder (ocb) writes for these components.

    python -m tests.support.otelcol_build [--force]

prints the binary's path. `OTELCOL_BIN` overrides the build.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from tests.support import gobuild
from tests.support.gobuild import Build

COLLECTOR_VERSION = "v0.165.0"  # the collector's v0 modules; its stable (v1) modules go with it:
STABLE_VERSION = "v1.71.0"
_MODULE_PATH = "coreio.invalid/otelcol"
_COMPONENTS = {
    "go.opentelemetry.io/collector/otelcol": COLLECTOR_VERSION,
    "go.opentelemetry.io/collector/receiver/otlpreceiver": COLLECTOR_VERSION,
    "go.opentelemetry.io/collector/exporter/otlphttpexporter": COLLECTOR_VERSION,
    "go.opentelemetry.io/collector/service": COLLECTOR_VERSION,
    "go.opentelemetry.io/collector/component": STABLE_VERSION,
    "go.opentelemetry.io/collector/confmap": STABLE_VERSION,
    "go.opentelemetry.io/collector/confmap/provider/envprovider": STABLE_VERSION,
    "go.opentelemetry.io/collector/confmap/provider/fileprovider": STABLE_VERSION,
    "go.opentelemetry.io/collector/exporter": STABLE_VERSION,
    "go.opentelemetry.io/collector/receiver": STABLE_VERSION,
}
_MAIN_TEMPLATE = """// The OpenTelemetry Collector with the OTLP receiver and the OTLP/HTTP exporter.
package main

import (
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](otlphttpexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "coreio's test collector",
			Version:     "%s",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// env: the default scheme of ${...} in a configuration.
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		os.Exit(1)
	}
}
"""
OTLP_RECEIVER = "go.opentelemetry.io/collector/receiver/otlpreceiver"


def main_go(receiver: str = OTLP_RECEIVER, version: str = COLLECTOR_VERSION, what: str = "") -> str:
    """The collector's main with `receiver` (a Go package whose NewFactory makes it) instead of
    the OTLP receiver, at `version`; `what` replaces the first line's description."""
    name = receiver.rsplit("/", 1)[1]
    main = _MAIN_TEMPLATE.replace("%s", version).replace(OTLP_RECEIVER, receiver)
    main = main.replace("otlpreceiver.NewFactory()", f"{name}.NewFactory()")
    return main.replace("with the OTLP receiver", what, 1) if what else main


_MAIN = main_go()


def go_mod() -> str:
    requires = "".join(f"\t{module} {version}\n" for module, version in sorted(_COMPONENTS.items()))
    return f"module {_MODULE_PATH}\n\ngo 1.25\n\nrequire (\n{requires})\n"


def _build(work: Path, out: Path) -> None:
    (work / "go.mod").write_text(go_mod())
    (work / "main.go").write_text(_MAIN)
    # Only the module proxy: a module it does not serve fails the build rather than being fetched
    # from its origin.
    proxy = {"GOPROXY": os.environ.get("COREIO_GOPROXY", "https://proxy.golang.org")}
    gobuild.run_go(["mod", "tidy"], work, extra_env=proxy)
    gobuild.run_go(
        ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "otelcol"), "."], work, extra_env=proxy
    )


def recipe() -> gobuild.Recipe:
    digest = hashlib.sha256((_MAIN + go_mod()).encode()).hexdigest()[:12]
    return gobuild.Recipe(
        binary="otelcol",
        version=COLLECTOR_VERSION,
        directory=f"otelcol-{COLLECTOR_VERSION}-{digest}",
        build=_build,
        override="OTELCOL_BIN",
    )


def ensure_collector(*, force: bool = False) -> Path:
    """The collector binary: $OTELCOL_BIN, or the cached build (built first when absent)."""
    if given := os.environ.get("OTELCOL_BIN"):
        return Path(given)
    build: Build = gobuild.ensure(recipe(), force=force)
    return build.path


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.otelcol_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
