"""CA and certificate issue, file handling, and the serving context's reload over real TLS."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import stat
import warnings
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store

from apiserver import pki
from tests.support.tls import serve_whoami


@pytest.fixture(scope="module")
def ca() -> pki.KeyPair:
    return pki.create_ca("test-ca")


def _eku(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


# --- issue ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_ca_is_self_signed_certificate_authority(key_type: pki.KeyType) -> None:
    ca = pki.create_ca("my-ca", key_type=key_type)
    cert = ca.certificate
    assert isinstance(ca.key, ec.EllipticCurvePrivateKey if key_type == "ec" else rsa.RSAPrivateKey)
    if isinstance(ca.key, rsa.RSAPrivateKey):
        assert ca.key.key_size == 2048
    else:
        assert ca.key.curve.name == "secp256r1"
    assert cert.subject == cert.issuer
    assert pki.is_signed_by(cert, cert)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign
    assert not pki.expires_within(cert, 9 * 365)


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_serving_certificate_defaults_to_loopback_names(ca: pki.KeyPair, key_type: pki.KeyType) -> None:
    serving = pki.issue_serving_certificate(ca, key_type=key_type)
    cert = serving.certificate
    assert pki.certificate_hosts(cert) == ["localhost", "127.0.0.1", "::1"]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert _eku(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert pki.is_signed_by(cert, ca.certificate)
    # Full path validation as a TLS client would do it, for each name.
    store = Store([ca.certificate])
    for name in (
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ):
        chain = PolicyBuilder().store(store).build_server_verifier(name).verify(cert, [])
        assert chain[-1] == ca.certificate


def test_serving_certificate_hosts_are_normalized(ca: pki.KeyPair) -> None:
    serving = pki.issue_serving_certificate(ca, ["API.example.com", "10.0.0.1", "0:0::1", "10.0.0.1", " "])
    assert pki.certificate_hosts(serving.certificate) == ["api.example.com", "10.0.0.1", "::1"]
    assert serving.certificate.subject.rfc4514_string() == "CN=api.example.com"
    store = Store([ca.certificate])
    verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("api.example.com"))
    verifier.verify(serving.certificate, [])
    with pytest.raises(ValueError):
        pki.issue_serving_certificate(ca, [])


def test_client_certificate_carries_user_and_groups(ca: pki.KeyPair) -> None:
    client = pki.issue_client_certificate(ca, "jane", ["system:masters", "devs"])
    cert = client.certificate
    assert pki.certificate_user(cert) == ("jane", ["system:masters", "devs"])
    assert _eku(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert pki.certificate_hosts(cert) == []
    assert pki.is_signed_by(cert, ca.certificate)
    assert not pki.is_signed_by(cert, pki.create_ca("other").certificate)


def test_expires_within(ca: pki.KeyPair) -> None:
    cert = pki.issue_client_certificate(ca, "short", days=10).certificate
    assert not pki.expires_within(cert, 9)
    assert pki.expires_within(cert, 11)
    assert pki.expires_within(cert, 30)
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=20)
    assert pki.expires_within(cert, 0, now=later)  # already expired by then


def test_save_and_load_pair(tmp_path: Path, ca: pki.KeyPair) -> None:
    pair = pki.issue_serving_certificate(ca)
    pair.save(tmp_path / "a" / "tls.crt", tmp_path / "a" / "tls.key")
    assert stat.S_IMODE((tmp_path / "a" / "tls.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a" / "tls.crt").stat().st_mode) == 0o600
    assert (tmp_path / "a" / "tls.key").read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    loaded = pki.KeyPair.load(tmp_path / "a" / "tls.crt", tmp_path / "a" / "tls.key")
    assert loaded.certificate == pair.certificate
    assert loaded.key_pem == pair.key_pem
    # No temporary files left behind.
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["tls.crt", "tls.key"]

    pki.save_private_key(tmp_path / "a" / "tls.key", pki.generate_key())
    with pytest.raises(ValueError, match="not the private key"):
        pki.KeyPair.load(tmp_path / "a" / "tls.crt", tmp_path / "a" / "tls.key")


# --- serving over real TLS --------------------------------------------------------------------


def _client_context(ca_file: Path, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    if client:
        ctx.load_cert_chain(*client)
    return ctx


async def _peer_certificate(
    port: int, ctx: ssl.SSLContext, server_hostname: str = "127.0.0.1"
) -> x509.Certificate:
    """Handshake (verifying the server for `server_hostname`) and return the server's certificate.

    An IP address as `server_hostname` sends no SNI, as kubectl does for `https://127.0.0.1:port`.
    """
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=server_hostname)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
def files(tmp_path: Path, ca: pki.KeyPair) -> Path:
    ca.save(tmp_path / "ca.crt", tmp_path / "ca.key")
    pki.issue_serving_certificate(ca).save(tmp_path / "tls.crt", tmp_path / "tls.key")
    return tmp_path


def test_context_requires_tls12(files: Path) -> None:
    serving = pki.ServingCertificate(files / "tls.crt", files / "tls.key")
    assert serving.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert serving.context.verify_mode == ssl.CERT_NONE
    with_ca = pki.ServingCertificate(files / "tls.crt", files / "tls.key", files / "ca.crt")
    assert with_ca.context.verify_mode == ssl.CERT_OPTIONAL


async def test_clients_below_tls12_are_refused(files: Path) -> None:
    serving = pki.ServingCertificate(files / "tls.crt", files / "tls.key")
    legacy = _client_context(files / "ca.crt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy.minimum_version = ssl.TLSVersion.TLSv1
        legacy.maximum_version = ssl.TLSVersion.TLSv1_1
    legacy.set_ciphers("DEFAULT:@SECLEVEL=0")  # so that it is the server, not the client, refusing
    tls12 = _client_context(files / "ca.crt")
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    async with serve_whoami(serving) as port:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _peer_certificate(port, legacy)
        assert await _peer_certificate(port, tls12) == serving.certificate


async def test_replaced_certificate_is_served_without_restart(files: Path, ca: pki.KeyPair) -> None:
    serving = pki.ServingCertificate(files / "tls.crt", files / "tls.key", reload_interval=0)
    first = serving.certificate
    client = _client_context(files / "ca.crt")
    async with serve_whoami(serving) as port:
        assert await _peer_certificate(port, client) == first
        assert await _peer_certificate(port, client, "localhost") == first

        second = pki.issue_serving_certificate(ca, ["localhost", "127.0.0.1", "coreio.example"])
        second.save(files / "tls.crt", files / "tls.key")

        # Both without SNI (IP address) and with SNI, the same listener now presents the new one.
        assert await _peer_certificate(port, client) == second.certificate
        assert await _peer_certificate(port, client, "localhost") == second.certificate
        assert await _peer_certificate(port, client, "coreio.example") == second.certificate
        assert serving.certificate == second.certificate

        # And HTTP over it works.
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{port}/whoami", ssl=client) as resp,
        ):
            assert resp.status == 200


async def test_reload_checks_files_at_most_every_interval(files: Path, ca: pki.KeyPair) -> None:
    serving = pki.ServingCertificate(files / "tls.crt", files / "tls.key", reload_interval=3600)
    first = serving.certificate
    client = _client_context(files / "ca.crt")
    async with serve_whoami(serving) as port:
        pki.issue_serving_certificate(ca).save(files / "tls.crt", files / "tls.key")
        assert await _peer_certificate(port, client) == first
        assert serving.reload()  # an explicit check picks it up at once
        assert await _peer_certificate(port, client) != first
        assert not serving.reload()  # nothing changed since


async def test_mismatched_pair_keeps_serving_previous_certificate(files: Path, ca: pki.KeyPair) -> None:
    serving = pki.ServingCertificate(files / "tls.crt", files / "tls.key", reload_interval=0)
    first = serving.certificate
    client = _client_context(files / "ca.crt")
    second = pki.issue_serving_certificate(ca)
    async with serve_whoami(serving) as port:
        # A rotation caught half-way: new certificate, old key.
        pki.save_certificate(files / "tls.crt", second.certificate)
        assert await _peer_certificate(port, client) == first
        pki.save_private_key(files / "tls.key", second.key)
        assert await _peer_certificate(port, client) == second.certificate


async def test_client_certificates_are_optional_and_verified(files: Path, ca: pki.KeyPair) -> None:
    admin = pki.issue_client_certificate(ca, "coreio-admin", ["system:masters"])
    admin.save(files / "admin.crt", files / "admin.key")
    stranger = pki.issue_client_certificate(pki.create_ca("other"), "mallory")
    stranger.save(files / "mallory.crt", files / "mallory.key")
    serving = pki.ServingCertificate(
        files / "tls.crt", files / "tls.key", files / "ca.crt", reload_interval=0
    )

    async def whoami(port: int, ctx: ssl.SSLContext) -> object:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{port}/whoami", ssl=ctx) as resp,
        ):
            assert resp.status == 200
            return (await resp.json())["user"]

    anonymous = _client_context(files / "ca.crt")
    with_admin = _client_context(files / "ca.crt", (files / "admin.crt", files / "admin.key"))
    with_stranger = _client_context(files / "ca.crt", (files / "mallory.crt", files / "mallory.key"))
    async with serve_whoami(serving) as port:
        assert await whoami(port, anonymous) is None  # e.g. a bearer-token client
        assert await whoami(port, with_admin) == "coreio-admin"
        with pytest.raises(aiohttp.ClientError):
            await whoami(port, with_stranger)

        # After a reload the new context verifies client certificates just the same.
        pki.issue_serving_certificate(ca).save(files / "tls.crt", files / "tls.key")
        assert await whoami(port, with_admin) == "coreio-admin"
        assert await whoami(port, anonymous) is None
        with pytest.raises(aiohttp.ClientError):
            await whoami(port, with_stranger)
        assert serving.current_context is not serving.context
