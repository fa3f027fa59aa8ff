# syntax=docker/dockerfile:1
# One image for every entry point: coreio-apiserver (the default), coreio-operator and coreio-export.
#   docker build -t ghcr.io/coreio/coreio:0.1.0 .
# The pods run it as 65532:65532 with a read-only root filesystem; the server writes only to
# --data-dir (an emptyDir at /var/lib/coreio) and reads its certificate from the mounted Secret.

# The base of both stages: the published Python image by default; the tests pass one made from
# Debian's packages (no registry is reachable there).
ARG BASE_IMAGE=python:3.11.14-slim-bookworm

# --- builder: a virtualenv in /opt/coreio holding the pinned dependencies and the project -----------
FROM ${BASE_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1

# The venv gets no pip or setuptools of its own: the base image's pip installs into it (--python).
RUN python -m venv --without-pip /opt/coreio

WORKDIR /src
# Dependencies first, in their own layer: it is rebuilt only when the pins change. Wheels only, so
# no compiler is needed (requirements/image.txt says how it is produced).
COPY requirements/image.txt requirements/image.txt
RUN pip --python /opt/coreio/bin/python install --no-cache-dir --only-binary=:all: \
        --requirement requirements/image.txt

# A C compiler for the modules mypyc compiles (setup.py), in this stage only: the runtime stage takes
# the venv alone. The published image has Python's headers; a base on Debian's python3 needs its -dev.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && headers="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
    && if [ ! -f "$headers/Python.h" ]; then apt-get install -y --no-install-recommends python3-dev; fi \
    && rm -rf /var/lib/apt/lists/*

COPY pyproject.toml setup.py README.md ./
COPY apiserver apiserver
COPY apiserver_operator apiserver_operator
COPY kubectl_coreio kubectl_coreio
COPY coreio_export coreio_export
# COREIO_MYPYC=1: the build fails rather than ship the pure-Python fallback.
RUN COREIO_MYPYC=1 pip --python /opt/coreio/bin/python install --no-cache-dir --no-deps . \
    && /opt/coreio/bin/python -I -c "import apiserver.apply.structure as m; assert m.__file__.endswith('.so')" \
    && /opt/coreio/bin/coreio-apiserver --help > /dev/null \
    && /opt/coreio/bin/coreio-operator --help > /dev/null \
    && /opt/coreio/bin/kubectl-coreio --help > /dev/null \
    && /opt/coreio/bin/coreio-export --help > /dev/null

# --- runtime: the same slim base and the venv, nothing else --------------------------------------
FROM ${BASE_IMAGE}

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="coreio" \
      org.opencontainers.image.description="Kubernetes extension API server for RoleBindings (rbac.authorization.core.io) and Events (events.core.io), and its operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/coreio/coreio" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"

ENV PATH="/opt/coreio/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=builder /opt/coreio /opt/coreio

# The data directory, owned by the runtime user so that a plain `docker run -v coreio:/var/lib/coreio`
# works too; in Kubernetes an emptyDir is mounted over it and the root filesystem is read-only.
# The user has a name too (`nonroot`, as in distroless images): libraries that ask for the user's
# name (getpass, kopf) fail for a uid /etc/passwd does not know.
RUN groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/coreio \
        --shell /usr/sbin/nologin nonroot \
    && install --directory --owner=65532 --group=65532 --mode=0750 /var/lib/coreio
WORKDIR /var/lib/coreio

# Numeric, so that runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8443

ENTRYPOINT ["coreio-apiserver"]
CMD ["--bind-address=0.0.0.0", \
     "--secure-port=8443", \
     "--data-dir=/var/lib/coreio", \
     "--tls-cert-file=/var/run/secrets/coreio/serving/tls.crt", \
     "--tls-private-key-file=/var/run/secrets/coreio/serving/tls.key"]
