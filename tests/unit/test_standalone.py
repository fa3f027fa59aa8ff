"""The standalone bootstrap: files, modes, idempotence, kubeconfig, token file."""

from __future__ import annotations

import base64
import ssl
import stat
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509

from apiserver import pki, standalone
from tests.support.tls import serve_whoami


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _kubeconfig(files: standalone.StandaloneFiles) -> dict[str, Any]:
    doc = yaml.safe_load(files.kubeconfig.read_text())
    assert isinstance(doc, dict)
    return doc


def test_creates_everything_with_private_modes(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "coreio"
    files = standalone.bootstrap(data_dir, port=6443)
    assert files.data_dir == data_dir
    assert _mode(data_dir) == 0o700
    assert _mode(files.pki_dir) == 0o700
    for key in (files.ca_key, files.serving_key, files.admin_key, files.token_file, files.kubeconfig):
        assert _mode(key) == 0o600, key
    for cert in (files.ca_cert, files.serving_cert, files.admin_cert):
        assert _mode(cert) == 0o600, cert
    assert files.pki_dir == data_dir / "pki"
    assert sorted(p.name for p in files.pki_dir.iterdir()) == [
        "admin.crt",
        "admin.key",
        "ca.crt",
        "ca.key",
        "serving.crt",
        "serving.key",
    ]
    assert files.server_url == "https://127.0.0.1:6443"
    assert files.admin_token not in repr(files)


def test_certificates_chain_to_the_ca(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, bind_address="127.0.0.1", port=6443, hosts=["coreio.local"])
    ca = pki.load_certificate(files.ca_cert)
    serving = pki.KeyPair.load(files.serving_cert, files.serving_key)
    admin = pki.KeyPair.load(files.admin_cert, files.admin_key)
    assert pki.is_signed_by(serving.certificate, ca)
    assert pki.is_signed_by(admin.certificate, ca)
    assert pki.certificate_hosts(serving.certificate) == ["localhost", "127.0.0.1", "::1", "coreio.local"]
    assert files.serving_hosts == ("localhost", "127.0.0.1", "::1", "coreio.local")
    assert pki.certificate_user(admin.certificate) == ("coreio-admin", ["system:masters"])


def test_second_start_reuses_credentials(tmp_path: Path) -> None:
    first = standalone.bootstrap(tmp_path, port=6443)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    inodes = {p: p.stat().st_ino for p in before}
    second = standalone.bootstrap(tmp_path, port=6443)
    assert second == first
    assert second.admin_token == first.admin_token
    for path, content in before.items():
        assert path.read_bytes() == content, path
        assert path.stat().st_ino == inodes[path], f"{path} was rewritten"


def test_new_port_rewrites_only_the_kubeconfig(tmp_path: Path) -> None:
    first = standalone.bootstrap(tmp_path, port=6443)
    kept = {p: p.read_bytes() for p in (first.ca_cert, first.ca_key, first.admin_cert, first.admin_key)}
    serving = first.serving_cert.read_bytes()
    second = standalone.bootstrap(tmp_path, port=7443)
    assert second.server_url == "https://127.0.0.1:7443"
    assert _kubeconfig(second)["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:7443"
    assert second.serving_cert.read_bytes() == serving
    for path, content in kept.items():
        assert path.read_bytes() == content
    assert second.admin_token == first.admin_token


def test_new_hosts_reissue_the_serving_certificate_only(tmp_path: Path) -> None:
    first = standalone.bootstrap(tmp_path, port=6443)
    ca, admin = first.ca_cert.read_bytes(), first.admin_cert.read_bytes()
    kubeconfig = first.kubeconfig.read_bytes()
    serving = first.serving_cert.read_bytes()
    second = standalone.bootstrap(tmp_path, port=6443, hosts=["10.1.2.3"])
    assert second.serving_cert.read_bytes() != serving
    assert "10.1.2.3" in pki.certificate_hosts(pki.load_certificate(second.serving_cert))
    assert (second.ca_cert.read_bytes(), second.admin_cert.read_bytes()) == (ca, admin)
    assert second.kubeconfig.read_bytes() == kubeconfig


def test_expiring_serving_certificate_is_reissued(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, port=6443)
    ca = pki.KeyPair.load(files.ca_cert, files.ca_key)
    short = pki.issue_serving_certificate(ca, list(files.serving_hosts), days=10)
    short.save(files.serving_cert, files.serving_key)
    standalone.bootstrap(tmp_path, port=6443)
    renewed = pki.load_certificate(files.serving_cert)
    assert renewed != short.certificate
    assert not pki.expires_within(renewed, 300)
    assert files.ca_cert.read_bytes() == ca.cert_pem


def test_serving_certificate_of_a_foreign_ca_is_replaced(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, port=6443)
    foreign = pki.issue_serving_certificate(pki.create_ca("foreign"), list(files.serving_hosts))
    foreign.save(files.serving_cert, files.serving_key)
    standalone.bootstrap(tmp_path, port=6443)
    assert pki.is_signed_by(pki.load_certificate(files.serving_cert), pki.load_certificate(files.ca_cert))


@pytest.mark.parametrize(
    ("bind_address", "url", "hosts"),
    [
        ("0.0.0.0", "https://127.0.0.1:6443", ["localhost", "127.0.0.1", "::1"]),
        ("::", "https://127.0.0.1:6443", ["localhost", "127.0.0.1", "::1"]),
        ("::1", "https://[::1]:6443", ["localhost", "127.0.0.1", "::1"]),
        ("192.168.1.5", "https://192.168.1.5:6443", ["localhost", "127.0.0.1", "::1", "192.168.1.5"]),
        ("myhost", "https://myhost:6443", ["localhost", "127.0.0.1", "::1", "myhost"]),
    ],
)
def test_bind_address(tmp_path: Path, bind_address: str, url: str, hosts: list[str]) -> None:
    files = standalone.bootstrap(tmp_path, bind_address=bind_address, port=6443)
    assert files.server_url == url
    assert _kubeconfig(files)["clusters"][0]["cluster"]["server"] == url
    assert pki.certificate_hosts(pki.load_certificate(files.serving_cert)) == hosts


def test_kubeconfig_is_valid_and_its_credentials_verify(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, port=6443)
    doc = _kubeconfig(files)
    assert doc["apiVersion"] == "v1"
    assert doc["kind"] == "Config"
    assert doc["current-context"] == "coreio"
    (context,) = doc["contexts"]
    assert context == {
        "name": "coreio",
        "context": {"cluster": "coreio", "user": "coreio-admin", "namespace": "default"},
    }
    (cluster,) = doc["clusters"]
    assert cluster["name"] == "coreio"
    ca_pem = base64.b64decode(cluster["cluster"]["certificate-authority-data"])
    assert ca_pem == files.ca_cert.read_bytes()
    ca = x509.load_pem_x509_certificate(ca_pem)
    assert pki.is_signed_by(pki.load_certificate(files.serving_cert), ca)
    (user,) = doc["users"]
    assert user["name"] == "coreio-admin"
    client_cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    assert pki.is_signed_by(client_cert, ca)
    assert pki.certificate_user(client_cert) == ("coreio-admin", ["system:masters"])
    # The embedded key belongs to the embedded certificate (load_cert_chain checks the pair).
    with tempfile.TemporaryDirectory() as d:
        Path(d, "c.crt").write_bytes(base64.b64decode(user["user"]["client-certificate-data"]))
        Path(d, "c.key").write_bytes(base64.b64decode(user["user"]["client-key-data"]))
        ssl.create_default_context().load_cert_chain(Path(d, "c.crt"), Path(d, "c.key"))


async def test_kubeconfig_credentials_authenticate_over_tls(tmp_path: Path) -> None:
    """A client configured only from the kubeconfig reaches a server using the bootstrap's files."""
    files = standalone.bootstrap(tmp_path / "data", port=6443)
    serving = pki.ServingCertificate(files.serving_cert, files.serving_key, files.ca_cert)
    async with serve_whoami(serving) as port:
        standalone.bootstrap(tmp_path / "data", port=port)
        doc = _kubeconfig(files)
        cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        (tmp_path / "c.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
        (tmp_path / "c.key").write_bytes(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{cluster['server']}/whoami", ssl=ctx) as resp,
        ):
            assert resp.status == 200
            assert (await resp.json())["user"] == "coreio-admin"


def test_kubeconfig_keeps_foreign_entries_when_unchanged(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, port=6443)
    doc = _kubeconfig(files)
    doc["contexts"].append({"name": "mine", "context": {"cluster": "coreio", "user": "coreio-admin"}})
    files.kubeconfig.write_text(yaml.safe_dump(doc))
    standalone.bootstrap(tmp_path, port=6443)
    assert [c["name"] for c in _kubeconfig(files)["contexts"]] == ["coreio", "mine"]
    files.kubeconfig.write_text("{not yaml")
    standalone.bootstrap(tmp_path, port=6443)
    assert _kubeconfig(files)["current-context"] == "coreio"


def test_token_file_holds_the_admin_token(tmp_path: Path) -> None:
    files = standalone.bootstrap(tmp_path, port=6443)
    tokens = standalone.load_token_file(files.token_file)
    assert list(tokens) == [files.admin_token]
    user, uid, groups = tokens[files.admin_token]
    assert (user, groups) == ("coreio-admin", ("system:masters",))
    assert uid
    assert len(files.admin_token) >= 32
    line = files.token_file.read_text()
    assert line == f"{files.admin_token},coreio-admin,{uid},system:masters\n"


def test_token_file_keeps_rows_added_by_hand(tmp_path: Path) -> None:
    (tmp_path / "tokens.csv").write_text('abc,alice,1,"devs,ops"')
    files = standalone.bootstrap(tmp_path, port=6443)
    tokens = standalone.load_token_file(files.token_file)
    assert tokens["abc"] == standalone.TokenUser("alice", "1", ("devs", "ops"))
    assert tokens[files.admin_token].user == "coreio-admin"
    assert standalone.bootstrap(tmp_path, port=6443).admin_token == files.admin_token


def test_load_token_file_format(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(
        "t1,user1,uid1\n"
        "\n"
        't2,user2,uid2,"group1,group2,group3"\n'
        "t3,user3,uid3,single,extra,columns\n"
        ',nobody,uid4,"g"\n'
        't5,"user, with comma",uid5,""\n'
        "t1,user1-again,uid1b\r\n"
    )
    assert standalone.load_token_file(path) == {
        "t1": ("user1-again", "uid1b", ()),
        "t2": ("user2", "uid2", ("group1", "group2", "group3")),
        "t3": ("user3", "uid3", ("single",)),
        "t5": ("user, with comma", "uid5", ()),
    }
    path.write_text("t1,user1\n")
    with pytest.raises(ValueError, match="at least 3 columns"):
        standalone.load_token_file(path)


def test_format_token_line_round_trips(tmp_path: Path) -> None:
    user = standalone.TokenUser("bob", "u-1", ("a", "b"))
    assert standalone.format_token_line("tok", user) == 'tok,bob,u-1,"a,b"\n'
    (tmp_path / "t.csv").write_text(standalone.format_token_line("tok", user))
    assert standalone.load_token_file(tmp_path / "t.csv") == {"tok": user}


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert standalone.default_data_dir() == tmp_path / "coreio"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert standalone.default_data_dir() == tmp_path / "home" / ".local" / "share" / "coreio"


def test_loose_data_dir_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir(mode=0o755)
    (tmp_path / "d").chmod(0o755)
    standalone.bootstrap(tmp_path / "d", port=6443)
    assert _mode(tmp_path / "d") == 0o700
