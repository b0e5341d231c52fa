"""What the etcd, backup and restore operators share about etcd: the EtcdCluster API types and
resource names (`etcd_cluster`, `etcd_version`, `constants`, `resources`), running etcdctl and
etcdutl (`etcdctl`), client certificates from secrets (`etcd_access`), and the TCP probe
(`tcp_probe`). Knows no operator; builds on `operator_runtime` and `kube_adapter`.
"""
