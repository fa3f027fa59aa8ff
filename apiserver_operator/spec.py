"""The Installation resource (`installations.operator.core.io/v1alpha1`): its spec as a typed model.

kube-apiserver applies the CRD's defaults (`charts/coreio/crds/installations.yaml`) before the
operator sees an object; the model carries the same defaults so that plain functions and tests get
them too (a unit test checks that the two agree). Durations are Go durations (`90s`, `2160h`), as
everywhere in Kubernetes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apiserver.machinery.gofmt import parse_go_duration
from apiserver.machinery.types import JSON

GROUP = "operator.core.io"
VERSION = "v1alpha1"
KIND = "Installation"
PLURAL = "installations"
# What the operator puts on each Installation so that it removes the children before it goes.
FINALIZER = f"{GROUP}/cleanup"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class _Model(BaseModel):
    # Unknown fields are the API server's business (the CRD prunes them); keep names camelCase.
    model_config = ConfigDict(alias_generator=_camel, populate_by_name=True, extra="ignore", frozen=True)


def _duration(value: str) -> str:
    parse_go_duration(value)
    return value


class EtcdStorage(_Model):
    endpoints: list[str] = Field(min_length=1)
    prefix: str = "/coreio"
    # A Secret with `ca.crt`, `tls.crt` and `tls.key` for etcd's client TLS; "" for plain HTTP.
    tls_secret_name: str = ""


class SQLiteStorage(_Model):
    size: str = "1Gi"
    storage_class_name: str = ""


class Storage(_Model):
    type: Literal["etcd", "sqlite"] = "sqlite"
    etcd: EtcdStorage | None = None
    sqlite: SQLiteStorage = SQLiteStorage()


class Certificates(_Model):
    ca_lifetime: str = "43800h"
    serving_lifetime: str = "2160h"
    # A certificate is renewed once this share of its lifetime has passed (with jitter).
    renew_at_percent: int = Field(default=67, ge=10, le=95)
    # How long the old CA stays in caBundle after the serving certificate moved to the new one.
    ca_grace_period: str = "10m"
    # Given, the operator issues nothing: the pods serve this Secret of the Installation's namespace
    # (tls.crt, tls.key and ca.crt, as cert-manager writes), and ca.crt is the caBundle.
    secret_name: str = Field(default="", max_length=253, pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$")

    _check = field_validator("ca_lifetime", "serving_lifetime", "ca_grace_period")(_duration)

    @property
    def ca_lifetime_seconds(self) -> float:
        return parse_go_duration(self.ca_lifetime)

    @property
    def serving_lifetime_seconds(self) -> float:
        return parse_go_duration(self.serving_lifetime)

    @property
    def ca_grace_seconds(self) -> float:
        return parse_go_duration(self.ca_grace_period)


class EventRetention(_Model):
    max_age: str = "1h"
    # A longer age for `type: Warning` Events; "" keeps them as long as the others.
    warning_max_age: str = ""
    # At most this many Events per namespace, the oldest Normal ones deleted first, then the oldest
    # Warnings; 0 for no limit.
    max_per_namespace: int = Field(default=0, ge=0)
    # A run deletes at most this many (the next run goes on), so that one run after a flood does
    # not hold the API server busy for long.
    max_deletes_per_run: int = Field(default=10000, ge=1)
    exempt_namespaces: list[str] = []
    exempt_reasons: list[str] = []
    interval: str = "5m"

    _check = field_validator("max_age", "interval")(_duration)

    @field_validator("warning_max_age")
    @classmethod
    def _optional_duration(cls, value: str) -> str:
        return _duration(value) if value else value


class APIServiceSettings(_Model):
    # Low, so that a bare `kubectl get rolebindings` keeps meaning the built-in group.
    group_priority_minimum: int = Field(default=1000, ge=1, le=20000)
    version_priority: int = Field(default=15, ge=1, le=1000)


class ExporterResources(_Model):
    requests: dict[str, str] = {"cpu": "50m", "memory": "96Mi"}
    limits: dict[str, str] = {"memory": "256Mi"}


class Exporters(_Model):
    # A Deployment of coreio-export for each EventExport in the namespaces the operator manages
    # (apiserver_operator/exporters.py); off: the exports' exporters are run by their owners.
    deploy: bool = True
    # Two: a standby (on another node where the scheduler can) takes over within the Lease's 15 s
    # when the leader's pod or node goes.
    replicas: int = Field(default=2, ge=1, le=10)
    resources: ExporterResources = ExporterResources()


class EventExportSettings(_Model):
    # Serve events.core.io/v1alpha1 (EventExport, docs/event-export.md): the server's
    # --runtime-config and the APIService v1alpha1.events.core.io. Off: an alpha version.
    enabled: bool = False
    exporters: Exporters = Exporters()


class Resources(_Model):
    requests: dict[str, str] = {"cpu": "100m", "memory": "128Mi"}
    limits: dict[str, str] = {"memory": "512Mi"}


class PodSettings(_Model):
    """What real clusters set on the API server's pods, as the charts of metrics-server,
    prometheus-adapter and cert-manager let them."""

    node_selector: dict[str, str] = {}
    tolerations: list[JSON] = []
    affinity: JSON = {}
    # Given, it replaces the default spread (zone, then host; ScheduleAnyway) of two or more replicas.
    topology_spread_constraints: list[JSON] = []
    # None by default, as cert-manager's and prometheus-adapter's charts: system-cluster-critical
    # (metrics-server's, in kube-system) is refused outside kube-system where a cluster limits it
    # by quota (GKE does), which would leave the pods uncreated.
    priority_class_name: str = ""
    image_pull_secrets: list[dict[str, str]] = []
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    # Given, it replaces the pod's securityContext (runAsUser 65532 and the rest): OpenShift's
    # restricted-v2 assigns the uid itself.
    security_context: JSON | None = None
    dns_policy: Literal["", "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] = ""
    # Where the control plane cannot reach pod addresses (EKS with a custom CNI, GKE private
    # clusters): the pods serve on their node's address, on `port`.
    host_network: bool = False
    port: int = Field(default=8443, ge=1024, le=65535)


class ServiceSettings(_Model):
    annotations: dict[str, str] = {}


class InstallationSpec(_Model):
    # Empty: the operator's --default-image (the chart passes its own image, so that an upgrade of
    # the chart moves both; a default in the CRD would stay behind, since Helm never upgrades CRDs).
    image: str = ""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    # SQLite allows one; with etcd, two or more keep it available through a node loss.
    replicas: int = Field(default=1, ge=1, le=50)
    storage: Storage = Storage()
    certificates: Certificates = Certificates()
    event_retention: EventRetention = EventRetention()
    api_service: APIServiceSettings = APIServiceSettings()
    event_export: EventExportSettings = EventExportSettings()
    resources: Resources = Resources()
    pod: PodSettings = PodSettings()
    service: ServiceSettings = ServiceSettings()
    # Extra flags for coreio-apiserver (e.g. `--event-ttl=2h`), after the operator's own.
    extra_args: list[str] = []


def parse_spec(spec: JSON | None) -> InstallationSpec:
    """The typed spec; raises pydantic.ValidationError for what the CRD schema would refuse."""
    return InstallationSpec.model_validate(dict(spec or {}))
