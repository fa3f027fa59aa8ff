"""Certificate authority, certificate issue and TLS serving with reload on rotation.

Shared by the standalone bootstrap (which creates its own CA) and the operator (which rotates the
serving certificate in a cluster). Certificates follow what kube-apiserver and client-go expect:
identities in SANs (never the CN alone), a client's user in the CN and its groups in O.

`ServingCertificate` builds the server's `ssl.SSLContext`. OpenSSL copies the certificate into
every connection when the connection is created, so a running server cannot simply reload its
context; instead the context's SNI callback (which OpenSSL runs on every ClientHello, with or
without a server name) hands the handshake a freshly built context whenever the files changed.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

logger = logging.getLogger(__name__)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
KeyType = Literal["ec", "rsa"]

DEFAULT_SERVING_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
CA_VALID_DAYS = 3650
CERT_VALID_DAYS = 365
# Certificates start slightly in the past so that a peer whose clock lags accepts them at once.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    certificate: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return private_key_pem(self.key)

    def save(self, cert_path: Path, key_path: Path) -> None:
        """Write both files atomically, the key first (0600) so a watcher never sees a new
        certificate next to an old key for longer than the reload retry."""
        write_file_atomic(key_path, self.key_pem, 0o600)
        write_file_atomic(cert_path, self.cert_pem, 0o600)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> KeyPair:
        certificate = load_certificate(cert_path)
        key = load_private_key(key_path)
        if not key_matches(certificate, key):
            raise ValueError(f"{key_path} is not the private key of {cert_path}")
        return cls(certificate, key)

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> KeyPair:
        """The pair from PEM bytes; ValueError when either is unreadable or they do not match."""
        certificate = x509.load_pem_x509_certificate(cert_pem)
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (TypeError, UnsupportedAlgorithm) as exc:  # encrypted, or an unknown algorithm
            raise ValueError(f"unusable private key: {exc}") from exc
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError(f"unsupported key type {type(key).__name__}")
        if not key_matches(certificate, key):
            raise ValueError("the private key does not belong to the certificate")
        return cls(certificate, key)


def key_matches(certificate: x509.Certificate, key: PrivateKey) -> bool:
    """True when `key` is the private key of `certificate`."""
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return certificate.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)


# --- keys and files ---------------------------------------------------------------------------


def generate_key(key_type: KeyType = "ec") -> PrivateKey:
    """A new EC P-256 (default) or RSA 2048 private key."""
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"unknown key type {key_type!r}")


def private_key_pem(key: PrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM, which Go (kubectl, Helm), OpenSSL and Python all read."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_file_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace `path` with `data` in one rename; the file never exists with looser permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def load_certificates(path: Path) -> list[x509.Certificate]:
    """All certificates of a PEM bundle."""
    return x509.load_pem_x509_certificates(path.read_bytes())


def load_private_key(path: Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{path}: unsupported key type {type(key).__name__}")
    return key


def save_certificate(path: Path, certificate: x509.Certificate) -> None:
    write_file_atomic(path, certificate.public_bytes(serialization.Encoding.PEM), 0o600)


def save_private_key(path: Path, key: PrivateKey) -> None:
    write_file_atomic(path, private_key_pem(key), 0o600)


# --- issue ------------------------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey | rsa.RSAPublicKey,
    days: int,
    *,
    lifetime: datetime.timedelta | None = None,
    now: datetime.datetime | None = None,
) -> x509.CertificateBuilder:
    """Valid from `now` (backdated) for `lifetime`, or `days` when no lifetime is given."""
    start = now or _now()
    end = start + (lifetime if lifetime is not None else datetime.timedelta(days=days))
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _BACKDATE)
        .not_valid_after(end)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(
    *, digital_signature: bool = False, key_encipherment: bool = False, ca: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def create_ca(
    common_name: str = "coreio-ca",
    *,
    days: int = CA_VALID_DAYS,
    key_type: KeyType = "ec",
    lifetime: datetime.timedelta | None = None,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A self-signed certificate authority, valid for `lifetime` (overrides `days`) from `now`."""
    key = generate_key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        _builder(name, name, key.public_key(), days, lifetime=lifetime, now=now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(digital_signature=True, ca=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(certificate, key)


def _issue(
    ca: KeyPair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    *,
    days: int,
    key_type: KeyType,
    sans: Sequence[x509.GeneralName] = (),
    lifetime: datetime.timedelta | None = None,
    now: datetime.datetime | None = None,
) -> KeyPair:
    key = generate_key(key_type)
    builder = (
        _builder(subject, ca.certificate.subject, key.public_key(), days, lifetime=lifetime, now=now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            # keyEncipherment only means something for RSA key transport.
            _key_usage(digital_signature=True, key_encipherment=isinstance(key, rsa.RSAPrivateKey)),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def normalize_hosts(hosts: Iterable[str]) -> list[str]:
    """Hosts deduplicated in order, IP addresses in canonical form (`0:0::1` -> `::1`)."""
    seen: dict[str, None] = {}
    for host in hosts:
        host = host.strip()
        if not host:
            continue
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            host = host.lower()
        seen.setdefault(host, None)
    return list(seen)


def issue_serving_certificate(
    ca: KeyPair,
    hosts: Sequence[str] = DEFAULT_SERVING_HOSTS,
    *,
    common_name: str | None = None,
    days: int = CERT_VALID_DAYS,
    key_type: KeyType = "ec",
    lifetime: datetime.timedelta | None = None,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A server-auth certificate for `hosts` (DNS names and IP addresses, as SANs), valid for
    `lifetime` (overrides `days`) from `now`."""
    names = normalize_hosts(hosts)
    if not names:
        raise ValueError("a serving certificate needs at least one host")
    cn = common_name or next((h for h in names if not _is_ip(h)), "coreio-apiserver")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    return _issue(
        ca,
        subject,
        ExtendedKeyUsageOID.SERVER_AUTH,
        days=days,
        key_type=key_type,
        sans=[_general_name(h) for h in names],
        lifetime=lifetime,
        now=now,
    )


def issue_client_certificate(
    ca: KeyPair,
    user: str,
    groups: Sequence[str] = (),
    *,
    days: int = CERT_VALID_DAYS,
    key_type: KeyType = "ec",
) -> KeyPair:
    """A client-auth certificate: CN = user name, one O per group (kube-apiserver's x509 authn)."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    return _issue(ca, x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH, days=days, key_type=key_type)


# --- inspection -------------------------------------------------------------------------------


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def certificate_hosts(certificate: x509.Certificate) -> list[str]:
    """The DNS names and IP addresses of the SAN extension in order, normalized like `normalize_hosts`."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return normalize_hosts(str(name.value) for name in san if isinstance(name, x509.DNSName | x509.IPAddress))


def certificate_user(certificate: x509.Certificate) -> tuple[str, list[str]]:
    """(user, groups) as kube-apiserver's x509 authenticator reads them: CN and O."""
    subject = certificate.subject
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    user = str(cns[0].value) if cns else ""
    return user, [str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def expires_within(
    certificate: x509.Certificate, days: float, *, now: datetime.datetime | None = None
) -> bool:
    """True when the certificate is invalid at `now + days` (already expired counts, too)."""
    moment = (now or _now()) + datetime.timedelta(days=days)
    return certificate.not_valid_after_utc <= moment


def is_signed_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    """True when `ca` issued and signed `certificate` (signature and issuer name; no policy)."""
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


class CABundle:
    """Trust anchors from PEM bundle files, re-read when a file changes (checked at most every
    `reload_interval` seconds), to tell which authority issued a client certificate.

    The TLS handshake verifies a client's chain against the union of all the server's client CAs
    (`ServingCertificate`); authenticators then need to know *which* of those bundles the
    certificate belongs to, e.g. to trust front-proxy headers only from the front-proxy CA. Python's
    `ssl` (before 3.13) hands back the peer's leaf certificate only, so a certificate counts as
    issued by the bundle when one of the bundle's certificates signed it directly: a bundle that
    serves leaves issued by an intermediate CA must list that intermediate too.
    """

    def __init__(self, files: Sequence[Path], *, reload_interval: float = 1.0) -> None:
        self.files = tuple(Path(f) for f in files)
        self.reload_interval = reload_interval
        self._lock = threading.Lock()
        self._state: tuple[tuple[int, int, int], ...] | None = None
        self._certificates: list[x509.Certificate] = []
        self._checked = -float("inf")

    def certificates(self) -> list[x509.Certificate]:
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= self.reload_interval:
                self._checked = now
                self._reload()
            return list(self._certificates)

    def _reload(self) -> None:
        try:
            state = tuple(_file_state(p) for p in self.files)
            if state == self._state:
                return
            certificates = [c for path in self.files for c in load_certificates(path)]
        except (OSError, ValueError) as exc:
            # Keep the last good bundle: a replacement caught half-written is retried next time.
            logger.warning("CA bundle %s not (re)loaded: %s", ", ".join(map(str, self.files)), exc)
            return
        self._state, self._certificates = state, certificates

    def issued(self, certificate: x509.Certificate, *, now: datetime.datetime | None = None) -> bool:
        """True when one of the bundle's CAs signed `certificate` and it is valid at `now`."""
        moment = now or _now()
        if not certificate.not_valid_before_utc <= moment <= certificate.not_valid_after_utc:
            return False
        return any(is_signed_by(certificate, ca) for ca in self.certificates())


# --- serving ----------------------------------------------------------------------------------


def _file_state(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


class ServingCertificate:
    """The server's TLS context; picks up replaced certificate, key or client CA files.

    Pass `context` to aiohttp (`web.TCPSite(..., ssl_context=serving.context)`). New handshakes
    check the files' mtimes at most every `reload_interval` seconds; established connections keep
    the certificate they negotiated. A half-written pair (new certificate, old key) fails to load,
    keeps the previous certificate serving and is retried at the next check.

    With `client_ca`, clients may present a certificate (verified against it, `CERT_OPTIONAL`), so
    clients authenticating with bearer tokens and no certificate still connect.
    """

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        client_ca: Path | Sequence[Path] | None = None,
        *,
        reload_interval: float = 1.0,
    ) -> None:
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        if client_ca is None:
            self.client_ca_files: tuple[Path, ...] = ()
        elif isinstance(client_ca, Path | str):
            self.client_ca_files = (Path(client_ca),)
        else:
            self.client_ca_files = tuple(Path(p) for p in client_ca)
        self.reload_interval = reload_interval
        self._lock = threading.Lock()
        self._state = self._files_state()
        # The base context is the one the listener holds; it carries the SNI hook. Connections
        # are switched to `_current` whenever a reload produced one.
        self.context = self._build()
        self.context.sni_callback = self._on_client_hello
        self._current = self.context
        self._checked = time.monotonic()
        self.certificate = load_certificate(self.cert_file)

    def _files(self) -> tuple[Path, ...]:
        return (self.cert_file, self.key_file, *self.client_ca_files)

    def _files_state(self) -> tuple[tuple[int, int, int], ...]:
        return tuple(_file_state(p) for p in self._files())

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca_files:
            ctx.verify_mode = ssl.CERT_OPTIONAL
            for ca_file in self.client_ca_files:
                ctx.load_verify_locations(cafile=ca_file)
        return ctx

    @property
    def current_context(self) -> ssl.SSLContext:
        """The context new handshakes use (the base one until the first reload)."""
        return self._current

    def reload(self, *, force: bool = False) -> bool:
        """Rebuild the context if the files changed (or `force`); True when a new one was built."""
        with self._lock:
            self._checked = time.monotonic()
            try:
                state = self._files_state()
                if state == self._state and not force:
                    return False
                context = self._build()
                certificate = load_certificate(self.cert_file)
            except (OSError, ssl.SSLError, ValueError) as exc:
                # Most likely a rotation caught between its two file writes; try again later.
                logger.warning("serving certificate not reloaded: %s", exc)
                return False
            self._state, self._current, self.certificate = state, context, certificate
        logger.info(
            "serving certificate reloaded: serial %x, expires %s",
            certificate.serial_number,
            certificate.not_valid_after_utc.isoformat(),
        )
        return True

    def _on_client_hello(self, ssl_obj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        # Exceptions here would abort the handshake; `reload` already logs and swallows them.
        if time.monotonic() - self._checked >= self.reload_interval:
            self.reload()
        current = self._current
        if current is not ctx:
            ssl_obj.context = current
