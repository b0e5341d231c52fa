#!/usr/bin/env bash
# `make demo`: sandbox up, CRDs installed, the three operators deployed as pods, the example cluster
# Running and backed up once to the sandbox S3. The operators run from the image `make image` builds
# (localhost/etcd-operator-py:<version>, which the sandbox runs in runc); DEMO_IMAGE=venv runs them
# from this checkout's virtualenv instead (the manifests' etcd-operator-py:<version>).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
sandbox() { "$VENV/bin/python" -m kube_sandbox "$@"; }
kubectl() { sandbox kubectl "$@"; }
TIMEOUT_SECONDS="${DEMO_TIMEOUT_SECONDS:-300}"

DEMO_IMAGE="${DEMO_IMAGE:-built}"
case $DEMO_IMAGE in
  built) IMAGE="localhost/$(bash scripts/build-image.sh)" ;;
  venv) IMAGE="" ;;
  *) echo "DEMO_IMAGE must be built or venv, not $DEMO_IMAGE" >&2; exit 2 ;;
esac
# deploy/*.yaml, naming the built image where they name the operators' (also the seed images they pass on).
manifests() {
  local file
  for file; do echo "---"; cat "$file"; done | if [ -n "$IMAGE" ]; then
    sed -E "s#([ \"])etcd-operator-py:[0-9A-Za-z._-]+#\1$IMAGE#g"
  else
    cat
  fi
}

sandbox up
kubectl apply -f crds/
kubectl wait --for=condition=Established --timeout=60s crd --all
kubectl api-resources --api-group=etcd.database.coreos.com >/dev/null  # refresh kubectl's discovery cache
kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml
manifests deploy/operator.yaml | kubectl apply -f -
kubectl -n etcd-operator rollout status deployment/etcd-operator --timeout=120s
kubectl apply -n default -f examples/example-etcd-cluster.yaml

echo "waiting for example-etcd-cluster to be Running with 3 ready members..."
deadline=$(( $(date +%s) + TIMEOUT_SECONDS ))
while :; do
  phase=$(kubectl -n default get etcd example-etcd-cluster -o jsonpath='{.status.phase}' 2>/dev/null || true)
  ready=$(kubectl -n default get etcd example-etcd-cluster -o jsonpath='{.status.readyCount}' 2>/dev/null || true)
  [ "$phase" = Running ] && [ "$ready" = 3 ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "example-etcd-cluster not Running after ${TIMEOUT_SECONDS}s (phase=$phase ready=$ready)" >&2
    kubectl -n default describe etcd example-etcd-cluster >&2 || true
    exit 1
  fi
  sleep 1
done

kubectl -n default get etcd
kubectl -n default get pods,services -l etcd_cluster=example-etcd-cluster

# The backup and restore operators, and one backup of the example cluster into the sandbox's S3.
manifests deploy/backup-operator.yaml deploy/restore-operator.yaml | kubectl apply -f -
kubectl -n etcd-operator rollout status deployment/etcd-backup-operator --timeout=120s
kubectl -n etcd-operator rollout status deployment/etcd-restore-operator --timeout=120s
kubectl -n etcd-operator get pods -o custom-columns='POD:.metadata.name,IMAGE:.spec.containers[0].image,CONTAINER:.status.containerStatuses[0].containerID'
S3_ENDPOINT=$("$VENV/bin/python" -c 'from kube_sandbox.config import SandboxConfig; print(SandboxConfig.from_env().s3_endpoint)')
"$VENV/bin/python" - "$S3_ENDPOINT" <<'PY'
import sys
from kube_sandbox.config import SandboxConfig
from etcd_common.storage.s3 import AwsCredentials, S3Storage
config = SandboxConfig.from_env()
S3Storage(endpoint=sys.argv[1], force_path_style=True,
          credentials=AwsCredentials(config.s3_access_key, config.s3_secret_key)).create_bucket("etcd-backups")
PY
sed "s#http://127.0.0.1:16333#$S3_ENDPOINT#" examples/sandbox-backup.yaml | kubectl apply -n default -f -
echo "waiting for the backup of example-etcd-cluster..."
deadline=$(( $(date +%s) + TIMEOUT_SECONDS ))
until [ "$(kubectl -n default get etcdbackup example-etcd-cluster-backup -o jsonpath='{.status.succeeded}' 2>/dev/null)" = true ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "no backup after ${TIMEOUT_SECONDS}s" >&2
    kubectl -n default describe etcdbackup example-etcd-cluster-backup >&2 || true
    exit 1
  fi
  sleep 1
done
kubectl -n default get etcdbackup
KUBECONFIG_PATH=$("$VENV/bin/python" -c 'from kube_sandbox.config import SandboxConfig; print(SandboxConfig.from_env().kubeconfig)')
cat <<MSG

The sandbox is running with the three operators, example-etcd-cluster and one backup of it. Try:
  export KUBECONFIG=$KUBECONFIG_PATH
  $VENV/bin/python -m kube_sandbox kubectl get etcd -A            # the sandbox's kubectl with that kubeconfig
  $VENV/bin/python -m kube_sandbox kubectl -n default patch etcd example-etcd-cluster --type=merge -p '{"spec":{"size":5}}'
  $VENV/bin/python -m kube_sandbox exec -- etcdctl --endpoints=http://example-etcd-cluster-client.default.svc:2379 member list -w table
  $VENV/bin/python -m kube_sandbox kubectl -n etcd-operator logs deploy/etcd-operator
  $VENV/bin/python -m kube_sandbox kubectl -n default get etcdbackup example-etcd-cluster-backup -o jsonpath='{.status.lastBackup}'
  $VENV/bin/etcd-backup --kubeconfig $KUBECONFIG_PATH --namespace default --from-backup example-etcd-cluster-backup --list
  make down                                                        # stop everything
MSG
