"""Object storage for snapshots, one module per backend: S3 (`s3`) today; Azure Blob Storage, GCS and
Alibaba OSS come next, each as its own module beside it."""
