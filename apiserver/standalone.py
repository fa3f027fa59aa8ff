"""Standalone bootstrap: the data directory's CA, serving certificate, admin credentials, kubeconfig.

Layout under the data directory (0700):

    pki/ca.crt, pki/ca.key                 the CA (kept across starts, so kubeconfigs keep working)
    pki/serving.crt, pki/serving.key       re-issued when the hosts change or expiry is near
    pki/admin.crt, pki/admin.key           client certificate CN=coreio-admin, O=system:masters
    tokens.csv                             kube-apiserver --token-auth-file format, admin token
    kubeconfig                             cluster/user/context `coreio`, pointing at the server
    apiserver.lock                         held by the server owning the directory: its pid, address
    .lock                                  held while `bootstrap` writes

Every start calls `bootstrap`; it only writes what is missing, stale or changed. Before that the
server takes the directory with `lock_data_dir`, whatever its storage, and keeps it until it exits.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import fcntl
import io
import ipaddress
import logging
import os
import secrets
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from apiserver import pki

logger = logging.getLogger(__name__)

ADMIN_USER = "coreio-admin"
ADMIN_GROUPS: tuple[str, ...] = ("system:masters",)
KUBECONFIG_NAME = "coreio"
RENEW_BEFORE_DAYS = 30
LOCK_FILE = "apiserver.lock"
# How often, 50 ms apart, a refused server reads who holds the lock before it gives up naming them.
_HOLDER_READS = 10
_WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class StandaloneFiles:
    """Where the bootstrap put everything, and what the kubeconfig points at."""

    data_dir: Path
    pki_dir: Path
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    token_file: Path
    kubeconfig: Path
    server_url: str
    serving_hosts: tuple[str, ...]
    admin_token: str = field(repr=False)


class TokenUser(NamedTuple):
    user: str
    uid: str
    groups: tuple[str, ...]


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/coreio`, else `~/.local/share/coreio`."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "coreio"


def client_host(bind_address: str) -> str:
    """The address clients use to reach a server bound to `bind_address` (wildcards -> loopback)."""
    return "127.0.0.1" if bind_address in _WILDCARD_ADDRESSES else bind_address


def server_url(bind_address: str, port: int) -> str:
    host = client_host(bind_address)
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    return f"https://{host}:{port}"


def serving_hosts(bind_address: str, hosts: Sequence[str] = ()) -> list[str]:
    """The SANs of the serving certificate: the loopback names, the bind address, extra hosts."""
    bound = () if bind_address in _WILDCARD_ADDRESSES else (bind_address,)
    return pki.normalize_hosts([*pki.DEFAULT_SERVING_HOSTS, *bound, *hosts])


def bootstrap(
    data_dir: Path,
    *,
    bind_address: str = "127.0.0.1",
    port: int,
    hosts: Sequence[str] = (),
) -> StandaloneFiles:
    """Create or refresh the standalone credentials for a server at `bind_address:port`.

    `hosts` adds SANs to the serving certificate (e.g. the machine's name when binding 0.0.0.0).
    Idempotent and safe against a concurrent start on the same directory (file lock).
    """
    data_dir = Path(data_dir)
    pki_dir = data_dir / "pki"
    _ensure_private_dir(data_dir)
    _ensure_private_dir(pki_dir)
    wanted_hosts = serving_hosts(bind_address, hosts)
    url = server_url(bind_address, port)
    with _locked(data_dir / ".lock"):
        ca = _ensure_ca(pki_dir / "ca.crt", pki_dir / "ca.key")
        _ensure_serving(ca, pki_dir / "serving.crt", pki_dir / "serving.key", wanted_hosts)
        admin = _ensure_admin(ca, pki_dir / "admin.crt", pki_dir / "admin.key")
        token = _ensure_admin_token(data_dir / "tokens.csv")
        _ensure_kubeconfig(data_dir / "kubeconfig", url, ca, admin)
    return StandaloneFiles(
        data_dir=data_dir,
        pki_dir=pki_dir,
        ca_cert=pki_dir / "ca.crt",
        ca_key=pki_dir / "ca.key",
        serving_cert=pki_dir / "serving.crt",
        serving_key=pki_dir / "serving.key",
        admin_cert=pki_dir / "admin.crt",
        admin_key=pki_dir / "admin.key",
        token_file=data_dir / "tokens.csv",
        kubeconfig=data_dir / "kubeconfig",
        server_url=url,
        serving_hosts=tuple(wanted_hosts),
        admin_token=token,
    )


def _ensure_private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class DataDirInUseError(Exception):
    """Another process holds the data directory."""

    def __init__(self, data_dir: Path, holder: str) -> None:
        super().__init__(f"data directory {data_dir} is in use by {holder}")
        self.data_dir = data_dir
        self.holder = holder


@dataclass
class DataDirLock:
    """The data directory, held by this process until `release` or its end: the kernel drops the
    lock with the process, however it ends (kill -9 included), so a restart after a crash takes it."""

    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def lock_data_dir(data_dir: Path, address: str) -> DataDirLock:
    """Takes `data_dir` (made if missing) for this process, writing its pid and `address` for the
    next one to read; DataDirInUseError naming the holder when another process has it."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirInUseError(data_dir, lock_holder(path)) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {address}\n".encode(), 0)
    return DataDirLock(path, fd)


def lock_holder(path: Path) -> str:
    """`pid 123 (https://127.0.0.1:6443)` as the holder of the lock file wrote it; `another
    process` if it wrote nothing readable, or names a process gone, in half a second (a holder
    that has just taken the lock writes right after)."""
    for attempt in range(_HOLDER_READS):
        if attempt:
            time.sleep(0.05)
        try:
            pid_text, _, address = path.read_text(encoding="utf-8").strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if pid > 0 and _running(pid):
            return f"pid {pid} ({address})" if address else f"pid {pid}"
    return "another process"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody else's
    return True


def _load_pair(cert_path: Path, key_path: Path) -> pki.KeyPair | None:
    if not (cert_path.exists() and key_path.exists()):
        return None
    try:
        return pki.KeyPair.load(cert_path, key_path)
    except ValueError as exc:
        logger.warning("replacing unreadable %s: %s", cert_path, exc)
        return None


def _ensure_ca(cert_path: Path, key_path: Path) -> pki.KeyPair:
    ca = _load_pair(cert_path, key_path)
    if ca is not None and not pki.expires_within(ca.certificate, RENEW_BEFORE_DAYS):
        return ca
    # A new CA invalidates every kubeconfig handed out; it only happens on first start, or
    # when the ten-year CA is about to expire anyway.
    logger.info("creating CA %s", cert_path)
    ca = pki.create_ca("coreio-ca")
    ca.save(cert_path, key_path)
    return ca


def _valid_leaf(pair: pki.KeyPair | None, ca: pki.KeyPair) -> bool:
    return (
        pair is not None
        and pki.is_signed_by(pair.certificate, ca.certificate)
        and not pki.expires_within(pair.certificate, RENEW_BEFORE_DAYS)
    )


def _ensure_serving(ca: pki.KeyPair, cert_path: Path, key_path: Path, hosts: list[str]) -> pki.KeyPair:
    current = _load_pair(cert_path, key_path)
    if (
        current is not None
        and _valid_leaf(current, ca)
        and sorted(pki.certificate_hosts(current.certificate)) == sorted(hosts)
    ):
        return current
    logger.info("issuing serving certificate for %s", ", ".join(hosts))
    serving = pki.issue_serving_certificate(ca, hosts)
    serving.save(cert_path, key_path)
    return serving


def _ensure_admin(ca: pki.KeyPair, cert_path: Path, key_path: Path) -> pki.KeyPair:
    current = _load_pair(cert_path, key_path)
    if (
        current is not None
        and _valid_leaf(current, ca)
        and pki.certificate_user(current.certificate) == (ADMIN_USER, list(ADMIN_GROUPS))
    ):
        return current
    logger.info("issuing admin client certificate %s", cert_path)
    admin = pki.issue_client_certificate(ca, ADMIN_USER, ADMIN_GROUPS)
    admin.save(cert_path, key_path)
    return admin


# --- static tokens ----------------------------------------------------------------------------


def load_token_file(path: Path) -> dict[str, TokenUser]:
    """Parse a kube-apiserver `--token-auth-file`: `token,user,uid[,"group1,group2"[,...]]`.

    As upstream: at least three columns, extra columns ignored, rows with an empty token skipped,
    a repeated token wins with its last row. Empty group names are dropped.
    """
    tokens: dict[str, TokenUser] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for number, record in enumerate(csv.reader(f, strict=True), start=1):
            if not record:
                continue
            if len(record) < 3:
                raise ValueError(
                    f"token file '{path}' must have at least 3 columns (token, user name, user uid), "
                    f"found {len(record)} in record {number}"
                )
            if not record[0]:
                logger.warning("empty token in token file '%s', record %d", path, number)
                continue
            groups = tuple(g for g in record[3].split(",") if g) if len(record) > 3 else ()
            tokens[record[0]] = TokenUser(record[1], record[2], groups)
    return tokens


def format_token_line(token: str, user: TokenUser) -> str:
    """One CSV row for the token file, quoted as upstream documents it."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([token, user.user, user.uid, ",".join(user.groups)])
    return out.getvalue()


def _ensure_admin_token(path: Path) -> str:
    existing = load_token_file(path) if path.exists() else {}
    for token, user in existing.items():
        if user.user == ADMIN_USER and set(ADMIN_GROUPS) <= set(user.groups):
            return token
    token = secrets.token_urlsafe(32)
    line = format_token_line(token, TokenUser(ADMIN_USER, str(uuid.uuid4()), ADMIN_GROUPS))
    # Keep rows the operator of this machine added by hand; append the admin row.
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    pki.write_file_atomic(path, (old + line).encode(), 0o600)
    return token


# --- kubeconfig -------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_document(url: str, ca: pki.KeyPair, admin: pki.KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": KUBECONFIG_NAME,
                "cluster": {"server": url, "certificate-authority-data": _b64(ca.cert_pem)},
            }
        ],
        "users": [
            {
                "name": ADMIN_USER,
                "user": {
                    "client-certificate-data": _b64(admin.cert_pem),
                    "client-key-data": _b64(admin.key_pem),
                },
            }
        ],
        "contexts": [
            {
                "name": KUBECONFIG_NAME,
                "context": {"cluster": KUBECONFIG_NAME, "user": ADMIN_USER, "namespace": "default"},
            }
        ],
        "current-context": KUBECONFIG_NAME,
        "preferences": {},
    }


def _named(doc: Any, section: str, name: str) -> Any:
    for item in doc.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def _ensure_kubeconfig(path: Path, url: str, ca: pki.KeyPair, admin: pki.KeyPair) -> None:
    wanted = kubeconfig_document(url, ca, admin)
    if path.exists():
        try:
            current = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            current = None
        # Only what we own decides: a user may have added contexts or preferences of their own.
        if isinstance(current, dict) and all(
            _named(current, section, name) == _named(wanted, section, name)
            for section, name in (
                ("clusters", KUBECONFIG_NAME),
                ("users", ADMIN_USER),
                ("contexts", KUBECONFIG_NAME),
            )
        ):
            return
    logger.info("writing kubeconfig %s for %s", path, url)
    pki.write_file_atomic(path, yaml.safe_dump(wanted, sort_keys=False).encode(), 0o600)
