# The operators' image: etcd-operator (the default entry point), etcd-backup-operator, etcd-backup,
# etcd-restore-operator and etcd-restore-seed (the restore init containers of seed pods). Its etcdctl and etcdutl,
# and etcd (the throwaway etcd of the backup operator's trial restores), come from the official etcd image of the
# default version.
# The base images are build arguments: `make image` (scripts/build-image.sh) passes local stand-ins
# for them where the public registries cannot be reached.
ARG ETCD_IMAGE=gcr.io/etcd-development/etcd:v3.6.16
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${ETCD_IMAGE} AS etcd
FROM ${PYTHON_IMAGE}
WORKDIR /app
COPY --from=etcd /usr/local/bin/etcd /usr/local/bin/etcdctl /usr/local/bin/etcdutl /usr/local/bin/
COPY setup.cfg pyproject.toml README.md ./
COPY kube_adapter ./kube_adapter
COPY operator_runtime ./operator_runtime
COPY etcd_common ./etcd_common
COPY etcd_operator ./etcd_operator
COPY backup_operator ./backup_operator
COPY restore_operator ./restore_operator
# uid/gid 10001: what deploy/operator.yaml runs as (the `restricted` Pod Security Standard).
RUN pip install --no-cache-dir . && groupadd --gid 10001 etcd-operator && useradd --uid 10001 --gid 10001 --no-create-home etcd-operator
USER 10001:10001
ENTRYPOINT ["etcd-operator"]
