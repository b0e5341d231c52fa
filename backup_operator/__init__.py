"""The EtcdBackup operator: etcd snapshots streamed to S3, one-shot and periodic with retention."""
