# One image for both entry points (coreio-apiserver, coreio-operator).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY apiserver ./apiserver
COPY operator ./operator
RUN pip install --no-cache-dir . && useradd --uid 65532 --create-home coreio
USER 65532
ENTRYPOINT ["coreio-apiserver"]
