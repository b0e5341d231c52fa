"""What the etcd, backup and restore operators share about etcd, in four layers (each imports only
those below it; setup.cfg [importlinter] holds the order):

- `seed`: the seed member restored from a snapshot (its init containers, `etcd-restore-seed`);
- `storage`: object storage for snapshots (S3);
- `etcd`: talking to etcd (etcdctl/etcdutl, probes, client TLS, snapshot integrity);
- `api`: the EtcdCluster, EtcdBackup and EtcdRestore kinds parsed at the edge, names and constants.

Knows no operator; builds on `operator_runtime` and `kube_adapter`.
"""
