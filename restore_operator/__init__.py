"""The EtcdRestore operator: verifies a snapshot in S3, then (re)creates the EtcdCluster with a
restore source that the etcd operator seeds from; done once the restored data is served."""
