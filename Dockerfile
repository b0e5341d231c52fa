# The operator image. Its etcdctl and etcdutl come from the official etcd image of the default version.
FROM gcr.io/etcd-development/etcd:v3.6.16 AS etcd
FROM python:3.11-slim-bookworm
WORKDIR /app
COPY --from=etcd /usr/local/bin/etcdctl /usr/local/bin/etcdutl /usr/local/bin/
COPY setup.cfg pyproject.toml README.md ./
COPY etcd_operator ./etcd_operator
RUN pip install --no-cache-dir . && useradd --uid 10001 operator
USER 10001
ENTRYPOINT ["etcd-operator"]
