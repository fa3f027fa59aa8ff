"""One real Kafka broker on loopback (tests.support.kafka_build's jars on the machine's JDK): a
KRaft node that is its own controller, its storage formatted first, as Kafka's quickstart does. It
listens on 127.0.0.1 only, and its topics are read back with aiokafka's consumer. With `secured`,
it also listens over TLS (a PEM key store, its certificate from a CA of its own: `ca`) and over
SASL (the one user `USER`, password `PASSWORD`), with PLAIN or SCRAM-SHA-256/512 (the user's SCRAM
credentials written into the storage as it is formatted, as KRaft wants them)."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from apiserver import pki
from tests.support.kafka_build import ensure_kafka
from tests.support.server import free_port
from tests.support.waiting import stopped, wait_until

PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}{listeners}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}{listeners}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
log.dirs={data}
num.partitions=3
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""
SECURED = """sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=\
  org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{password}";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=\
  org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=\
  org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
"""
USER, PASSWORD = "exporter", "s3cret-Pa55"


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH (or JAVA_HOME): the Kafka broker needs a JDK 17 or later")
    return found


@dataclass
class KafkaBroker:
    directory: Path
    secured: bool = False
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    tls_port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    ca: pki.KeyPair | None = None
    _process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "kafka.log"

    def _java(self, main: str, *args: str) -> list[str]:
        classpath = f"{ensure_kafka()}/*"
        return [java(), "-Xmx512m", "-XX:+UseSerialGC", "-cp", classpath, main, *args]

    def _properties(self) -> str:
        data = self.directory / "kafka-data"
        if not self.secured:
            return PROPERTIES.format(port=self.port, controller=self.controller_port, data=data, listeners="")
        self.ca = pki.create_ca("kafka-ca")
        serving = pki.issue_serving_certificate(self.ca, ["127.0.0.1"])
        keystore = self.directory / "broker.pem"  # the key (PKCS#8) and its certificate, one file
        keystore.write_bytes(serving.key_pem + serving.cert_pem)
        listeners = f",SSL://127.0.0.1:{self.tls_port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        plain = PROPERTIES.format(
            port=self.port, controller=self.controller_port, data=data, listeners=listeners
        )
        return plain + SECURED.format(user=USER, password=PASSWORD, keystore=keystore)

    def start(self) -> None:
        config = self.directory / "server.properties"
        config.write_text(self._properties())
        cluster = _cluster_id()
        scram = [
            f"--add-scram=SCRAM-SHA-{bits}=[name={USER},password={PASSWORD}]"
            for bits in (256, 512)
            if self.secured
        ]
        formatted = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config), *scram),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout}{formatted.stderr}")
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(self._java("kafka.Kafka", str(config)), stdout=log, stderr=log)
        wait_until(self._listening, timeout=90, message=self._failed)

    def _listening(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(self._failed())
        ports = [self.port, *([self.tls_port, self.sasl_port] if self.secured else [])]
        for port in ports:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return False
        return True

    def _failed(self) -> str:
        return "the Kafka broker listening; its output:\n" + self.log.read_text()[-3000:]

    def create_topic(self, name: str, partitions: int = 3) -> None:
        asyncio.run(_create_topic(self.bootstrap, name, partitions))

    def read(self, topic: str, count: int, timeout: float = 60.0) -> list[Any]:
        """The first `count` messages of `topic` (every partition, from the start), each in its
        partition's order; fewer when the timeout passes first."""
        return asyncio.run(_consume(self.bootstrap, topic, count, timeout))

    def stop(self) -> None:
        stopped(self._process)


async def _consume(bootstrap: str, topic: str, count: int, seconds: float) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    taken: list[Any] = []
    try:
        deadline = asyncio.get_running_loop().time() + seconds
        while len(taken) < count and asyncio.get_running_loop().time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                taken += messages
    finally:
        await consumer.stop()
    return taken


async def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


def _cluster_id() -> str:
    """A KRaft cluster ID: a random UUID in URL-safe base64, never starting with "-" (the format
    tool would read it as a flag; Kafka's own Uuid.randomUuid draws again for the same reason)."""
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster
