"""Fetches Apache Kafka's broker for the Kafka sink's tests from Maven Central, once, and caches it:
the `kafka_2.13` artifact and its runtime dependencies, as jars a `java -cp` runs (Kafka's own
distribution is these jars and its scripts). Maven resolves them (`dependency:copy-dependencies`);
the result is kept as `<cache root>/kafka-<version>/libs` with a stamp, beside the Go builds
(tests.support.gobuild's cache root), under the same file lock.

    python -m tests.support.kafka_build

prints the directory of the jars. `KAFKA_LIBS` overrides it (a directory of Kafka's jars).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support import gobuild

KAFKA_VERSION = "4.4.0"
SCALA = "2.13"
_STAMP = "build.json"
_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>invalid.coreio</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{SCALA}</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


def libs_path() -> Path:
    return gobuild.cache_root() / f"kafka-{KAFKA_VERSION}" / "libs"


def _fetch(destination: Path) -> None:
    maven = shutil.which("mvn")
    if maven is None:
        raise RuntimeError("no mvn on PATH: Kafka's broker is fetched from Maven Central with it")
    work = Path(tempfile.mkdtemp(prefix=".kafka.tmp-", dir=destination.parent.parent))
    try:
        (work / "pom.xml").write_text(_POM)
        goal = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
        done = subprocess.run(
            [maven, "-q", "-B", goal, "-DincludeScope=runtime", f"-DoutputDirectory={work / 'libs'}"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=gobuild.BUILD_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"mvn could not fetch Kafka {KAFKA_VERSION}:\n{(done.stdout + done.stderr)[-4000:]}"
            )
        (work / "libs" / _STAMP).write_text(f'{{"version": "{KAFKA_VERSION}"}}\n')
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.exists():
            shutil.rmtree(destination)
        (work / "libs").rename(destination)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_kafka() -> Path:
    """The directory of Kafka's jars: $KAFKA_LIBS, or the cached fetch (fetched first when absent)."""
    if given := os.environ.get("KAFKA_LIBS"):
        return Path(given)
    libs = libs_path()
    if (libs / _STAMP).exists():
        return libs
    with gobuild.locked(libs.parent.parent / f".kafka-{KAFKA_VERSION}.lock"):
        if not (libs / _STAMP).exists():
            _fetch(libs)
    return libs


def main() -> int:
    print(ensure_kafka())
    return 0


if __name__ == "__main__":
    sys.exit(main())
