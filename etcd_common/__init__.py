"""What the etcd, backup and restore operators share about etcd, in layers that import only
downwards (setup.cfg [importlinter] holds the order):

- `seed`: the seed member restored from a snapshot (its init containers, `etcd-restore-seed`);
- `storage`: object storage for snapshots (S3), and, independent of it,
  `etcd`: talking to etcd (etcdctl/etcdutl, probes, client TLS, snapshot integrity);
- `api`: the EtcdCluster, EtcdBackup and EtcdRestore kinds parsed at the edge, names, constants.

Knows no operator; below it are only `operator_runtime` and `kube_adapter`.
"""
