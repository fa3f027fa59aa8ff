"""Settings of one server process (what the command line sets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from apiserver.resources.base import ResourceKind
from apiserver.standalone import default_data_dir

# The generic admission plugins (k8s.io/apiserver's names); namespace lifecycle is on in a cluster.
NAMESPACE_LIFECYCLE = "NamespaceLifecycle"
VALIDATING_ADMISSION_POLICY = "ValidatingAdmissionPolicy"
VALIDATING_ADMISSION_WEBHOOK = "ValidatingAdmissionWebhook"
MUTATING_ADMISSION_WEBHOOK = "MutatingAdmissionWebhook"
# The generic plugins, by upstream's names, in upstream's order (all on unless disabled).
ADMISSION_PLUGINS = (
    NAMESPACE_LIFECYCLE,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
)


@dataclass
class Settings:
    data_dir: Path = field(default_factory=default_data_dir)
    bind_address: str = "127.0.0.1"
    secure_port: int = 8443
    # Empty: embedded SQLite under data_dir. Otherwise etcd endpoints (http(s)://host:port).
    etcd_servers: list[str] = field(default_factory=list)
    etcd_prefix: str = ""
    etcd_cafile: str = ""
    etcd_certfile: str = ""
    etcd_keyfile: str = ""
    # Serving certificate; empty: created in data_dir/pki.
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    client_ca_file: str = ""
    token_auth_file: str = ""
    # Front-proxy (request header) authentication, as kube-apiserver's --requestheader-* flags:
    # only a client certificate issued by this CA (and, when names are given, with one of these
    # CNs) may assert a user in the headers. Empty file: no front proxy is trusted.
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: list[str] = field(default_factory=list)
    requestheader_username_headers: list[str] = field(default_factory=lambda: ["X-Remote-User"])
    requestheader_uid_headers: list[str] = field(default_factory=list)
    requestheader_group_headers: list[str] = field(default_factory=lambda: ["X-Remote-Group"])
    requestheader_extra_headers_prefix: list[str] = field(default_factory=lambda: ["X-Remote-Extra-"])
    # Delegation to a cluster (TokenReview, SubjectAccessReview, extension-apiserver-authentication):
    # `kubeconfig` serves both when the specific one is empty; all empty: no delegation.
    kubeconfig: str = ""
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""
    authentication_cache_ttl: float = 10.0
    # Seconds between re-reads of kube-system/extension-apiserver-authentication (delegation).
    extension_authentication_refresh_interval: float = 60.0
    authorization_cache_ttl: float = 10.0
    # audit.k8s.io/v1 Events as JSON lines ("-" for stdout), at the levels and stages the policy
    # file sets (without one: every request at Metadata, once complete); the file rotated as
    # kube-apiserver rotates its own (sizes in megabytes, 0: 100; backups 0: all kept; age in days,
    # 0: no limit).
    audit_log_path: str = ""
    audit_policy_file: str = ""
    audit_log_maxsize: int = 0
    audit_log_maxbackup: int = 0
    audit_log_maxage: int = 0
    audit_log_format: str = "json"
    # The audit webhook (kube-apiserver's --audit-webhook-*): a kubeconfig naming the service the
    # events are POSTed to (empty: none); batch (buffered, throttled), blocking or blocking-strict;
    # retried from initial_backoff seconds on; optionally truncated (sizes in bytes).
    audit_webhook_config_file: str = ""
    audit_webhook_mode: str = "batch"
    audit_webhook_batch_buffer_size: int = 10000
    audit_webhook_batch_max_size: int = 400
    audit_webhook_batch_max_wait: float = 30.0
    audit_webhook_batch_throttle_enable: bool = True
    audit_webhook_batch_throttle_qps: float = 10.0
    audit_webhook_batch_throttle_burst: int = 15
    audit_webhook_initial_backoff: float = 10.0
    audit_webhook_truncate_enabled: bool = False
    audit_webhook_truncate_max_batch_size: int = 10 * 1024 * 1024
    audit_webhook_truncate_max_event_size: int = 100 * 1024
    audit_webhook_version: str = "audit.k8s.io/v1"
    # RBAC over the stored RoleBindings (the default) or AlwaysAllow.
    authorization_mode: str = "RBAC"
    # Standalone: Roles and ClusterRoles (YAML/JSON) on top of the default ClusterRoles.
    authorization_roles_file: str = ""
    # Admission policies and webhook configurations from a manifest file instead of the cluster.
    admission_config_file: str = ""
    # Who besides system:masters may call the SubjectAccessReview webhook endpoint.
    authorize_endpoint_users: list[str] = field(default_factory=list)
    authorize_endpoint_groups: list[str] = field(default_factory=list)
    # Generic admission plugins turned off (kube-apiserver's flag of the same name).
    disable_admission_plugins: list[str] = field(default_factory=list)
    # How long objects of the kinds that expire live, by resource (`events.events.core.io`), as
    # their flags (kube-apiserver's --event-ttl) set it; a kind not here lives its default.
    expiry_seconds: dict[str, int] = field(default_factory=dict)
    # Watches without timeoutSeconds end after a random time in [min, 2*min) (kube-apiserver's
    # --min-request-timeout).
    min_request_timeout: float = 1800.0
    watch_bookmark_interval: float = 60.0
    # Overload protection, as kube-apiserver's flags of the same names: requests served at once
    # (read-only and mutating; 0: unlimited; watches do not count), and how long any other request
    # may take (0: no limit). Connections idle or slow to send a request, and watches whose client
    # accepts nothing, are also closed after request_timeout.
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout: float = 60.0
    # How often history is compacted (kube-apiserver: every 5 minutes).
    compaction_interval: float = 300.0
    # The watch cache (kube-apiserver's --watch-cache), and the changes each resource's keeps.
    watch_cache: bool = True
    default_watch_cache_size: int = 10_000
    # Log lines as text or one JSON object each ("json").
    log_format: str = "text"
    # Worker processes serving the port, each with its own watch cache (0: one per core).
    workers: int = 0
    # How long a worker serving the port may go without turning its event loop before the
    # supervisor aborts it, and so ends the server, for whatever restarts it (0: never).
    worker_hang_timeout: float = 60.0
    # How often apiserver_storage_objects is counted (kube-apiserver's flag; 0: never).
    etcd_count_metric_poll_period: float = 60.0
    # The reasons and namespaces coreio_events_written_total names in each worker (then "other").
    events_metric_max_reasons: int = 100
    events_metric_max_namespaces: int = 100
    # Graceful termination, as kube-apiserver's flags of the same names: how long /readyz fails
    # while everything is still served before the listener closes, and over how long the open
    # watches are then ended (0: all at once).
    shutdown_delay_duration: float = 0.0
    # kube-apiserver's --runtime-config: which group versions are served (apiserver.resources.runtime_config).
    runtime_config: str = ""
    shutdown_watch_termination_grace_period: float = 0.0

    @property
    def standalone(self) -> bool:
        return not self.tls_cert_file

    def ttl_seconds(self, kind: ResourceKind) -> int:
        """How long `kind`'s objects live after their last write (0: until deleted)."""
        if kind.expiry is None:
            return 0
        return self.expiry_seconds.get(str(kind.group_resource), kind.expiry.default_seconds)
