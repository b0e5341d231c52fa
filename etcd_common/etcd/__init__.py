"""Talking to etcd: etcdctl/etcdutl, the per-pass HTTP and TCP probes, client TLS per cluster,
a cluster's client URL, and the integrity check of snapshot files."""
