"""One real Kafka broker on loopback (tests.support.kafka_build's jars on the machine's JDK): a
KRaft node that is its own controller, its storage formatted first, as Kafka's quickstart does. It
listens on 127.0.0.1 only, and its topics are read back with aiokafka's consumer."""

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

from tests.support.kafka_build import ensure_kafka
from tests.support.server import free_port
from tests.support.waiting import wait_until

PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
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


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH (or JAVA_HOME): the Kafka broker needs a JDK 17 or later")
    return found


@dataclass
class KafkaBroker:
    directory: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
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

    def start(self) -> None:
        config = self.directory / "server.properties"
        data = self.directory / "kafka-data"
        config.write_text(PROPERTIES.format(port=self.port, controller=self.controller_port, data=data))
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        formatted = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config)),
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
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def _failed(self) -> str:
        return "the Kafka broker listening; its output:\n" + self.log.read_text()[-3000:]

    def create_topic(self, name: str, partitions: int = 3) -> None:
        asyncio.run(_create_topic(self.bootstrap, name, partitions))

    def read(self, topic: str, count: int, timeout: float = 60.0) -> list[Any]:
        """The first `count` messages of `topic` (every partition, from the start), each in its
        partition's order; fewer when the timeout passes first."""
        return asyncio.run(_consume(self.bootstrap, topic, count, timeout))

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


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
