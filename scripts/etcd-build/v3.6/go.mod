// Builds etcd, etcdctl and etcdutl v3.6.16 from the Go module proxy (scripts/install-etcd-binaries.sh).
module etcd-operator-py/etcd-build-v3.6

go 1.26.0

require (
	go.etcd.io/etcd/etcdctl/v3 v3.6.16
	go.etcd.io/etcd/etcdutl/v3 v3.6.16
	go.etcd.io/etcd/server/v3 v3.6.16
)
