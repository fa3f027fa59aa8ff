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
    && apt-get install -y --no-install-recommends gcc libc6-dev curl \
    && headers="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
    && if [ ! -f "$headers/Python.h" ]; then apt-get install -y --no-install-recommends python3-dev; fi \
    && rm -rf /var/lib/apt/lists/*

# Rust for etcd's client extension (native/etcd_rpc), in this stage only: rustup's installer, checked
# against its published digest, installs the pinned toolchain's minimal profile.
ARG RUSTUP_VERSION=1.28.2
ARG RUST_VERSION=1.95.0
ENV RUSTUP_HOME=/opt/rust CARGO_HOME=/opt/rust PATH=/opt/rust/bin:${PATH}
RUN case "$(uname -m)" in \
        x86_64) digest=20a06e644b0d9bd2fbdbfd52d42540bdde820ea7df86e92e533c073da0cdd43c ;; \
        aarch64) digest=e3853c5a252fca15252d07cb23a1bdd9377a8c6f3efa01531109281ae47f841c ;; \
        *) echo "no Rust installer pinned for $(uname -m)" >&2; exit 1 ;; \
    esac \
    && curl --proto '=https' --tlsv1.2 -sSfo /tmp/rustup-init \
        "https://static.rust-lang.org/rustup/archive/${RUSTUP_VERSION}/$(uname -m)-unknown-linux-gnu/rustup-init" \
    && echo "${digest}  /tmp/rustup-init" > /tmp/rustup-init.sha256 \
    && sha256sum -c /tmp/rustup-init.sha256 \
    && chmod +x /tmp/rustup-init \
    && /tmp/rustup-init -y -q --no-modify-path --profile minimal --default-toolchain "${RUST_VERSION}" \
    && rm /tmp/rustup-init /tmp/rustup-init.sha256

COPY pyproject.toml setup.py README.md ./
COPY apiserver apiserver
COPY apiserver_operator apiserver_operator
COPY kubectl_coreio kubectl_coreio
COPY coreio_export coreio_export
COPY native native
# COREIO_MYPYC=1 and COREIO_NATIVE=1: the build fails rather than ship the pure-Python fallback.
RUN COREIO_MYPYC=1 COREIO_NATIVE=1 pip --python /opt/coreio/bin/python install --no-cache-dir --no-deps . \
    && /opt/coreio/bin/python -I -c "import apiserver.apply.structure as m; assert m.__file__.endswith('.so')" \
    && /opt/coreio/bin/python -I -c "from apiserver.storage.etcd import native; assert native.available()" \
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
