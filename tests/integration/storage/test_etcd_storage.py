"""What only the etcd backend has to get right: leases, unreachable endpoints, TLS, big responses;
each on the Rust extension's channel and on grpcio alone (as where the extension is not built)."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.storage.etcd import EtcdStorage, native
from apiserver.storage.interface import StorageUnavailableError
from tests.support.etcd import EtcdProcess, EtcdTLS, find_etcd_binary

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(find_etcd_binary() is None, reason="no etcd binary"),
]


@pytest.fixture(autouse=True, params=["native", "grpcio"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "grpcio":
        monkeypatch.setattr(native, "available", lambda: False)
    return str(request.param)


@contextlib.asynccontextmanager
async def opened(store: EtcdStorage):  # type: ignore[no-untyped-def]
    await store.start()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def private_etcd() -> Iterator[EtcdProcess]:
    with EtcdProcess() as etcd:
        yield etcd


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_keys_with_the_same_ttl_share_a_lease(private_etcd: EtcdProcess) -> None:
    async with opened(EtcdStorage([private_etcd.client_url])) as store:
        for name in "abc":
            await store.create(f"/l/{name}", b"x", ttl=30)
        await store.create("/l/d", b"x", ttl=600)
        first = await store.get("/l/a")
        assert first is not None
        await store.update("/l/a", b"y", expected_revision=first.mod_revision, ttl=30)
    url = f"{private_etcd.client_url}/v3/lease/leases"
    async with aiohttp.ClientSession() as session, session.post(url, json={}) as response:
        leases = (await response.json()).get("leases", [])
    assert len(leases) == 2


async def test_unreachable_etcd_is_unavailable() -> None:
    async with opened(EtcdStorage([f"http://127.0.0.1:{closed_port()}"], request_timeout=2)) as store:
        with pytest.raises(StorageUnavailableError):
            await store.get("/x")
        with pytest.raises(StorageUnavailableError):
            await store.create("/x", b"x")
        with pytest.raises(StorageUnavailableError):
            await store.list("/")
        with pytest.raises(StorageUnavailableError):
            async with contextlib.aclosing(store.watch("/", after_revision=0)) as events:
                await anext(events)


async def test_calls_move_on_to_the_next_endpoint(etcd_endpoint: str, transport: str) -> None:
    endpoints = [f"http://127.0.0.1:{closed_port()}", etcd_endpoint]
    # A read is asked again of the next endpoint at once, as clientv3 retries its repeatable calls.
    async with opened(EtcdStorage(endpoints, prefix=f"/failover-{transport}", request_timeout=2)) as store:
        assert await store.current_revision() > 0
        assert await store.get("/missing") is None
    # A write is not (it may have landed): it fails, and the next call goes to the next endpoint.
    async with opened(EtcdStorage(endpoints, prefix=f"/failover-{transport}", request_timeout=2)) as store:
        with pytest.raises(StorageUnavailableError):
            await store.create("/written", b"x")
        assert (await store.create("/written", b"x")).mod_revision > 0


async def test_lists_larger_than_grpc_default_message_limit(etcd_endpoint: str, transport: str) -> None:
    async with opened(EtcdStorage([etcd_endpoint], prefix=f"/big-{transport}")) as store:
        value = b"x" * (1024 * 1024)
        for i in range(6):
            await store.create(f"/b/{i}", value)
        result = await store.list("/b/")
        assert len(result.items) == 6 and all(item.value == value for item in result.items)


def _write_pki(directory: Path) -> tuple[EtcdTLS, Path, Path]:
    """A CA, a serving certificate for 127.0.0.1 and a client certificate, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)

    def issue(
        name: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            ).add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    def save(stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert_path, key_path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca_cert = issue("test-ca", ca_key, ca_name, ca_key, ca=True)
    ca_path, _ = save("ca", ca_cert, ca_key)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_cert, server_key_path = save(
        "server", issue("etcd", server_key, ca_name, ca_key, False), server_key
    )
    client_cert, client_key_path = save(
        "client", issue("coreio", client_key, ca_name, ca_key, False), client_key
    )
    return EtcdTLS(str(server_cert), str(server_key_path), str(ca_path)), client_cert, client_key_path


async def test_tls_with_client_certificate(tmp_path: Path) -> None:
    tls, client_cert, client_key = _write_pki(tmp_path)
    with EtcdProcess(tls=tls, health_client_cert=(str(client_cert), str(client_key))) as etcd:
        assert etcd.client_url.startswith("https://")
        store = EtcdStorage(
            [etcd.client_url], ca_file=tls.ca_file, cert_file=str(client_cert), key_file=str(client_key)
        )
        async with opened(store):
            created = await store.create("/tls/a", b"x")
            assert await store.get("/tls/a") == created
        # Without a client certificate the server refuses the connection.
        async with opened(
            EtcdStorage([etcd.client_url], ca_file=tls.ca_file, request_timeout=2)
        ) as anonymous:
            with pytest.raises(StorageUnavailableError):
                await anonymous.get("/tls/a")
