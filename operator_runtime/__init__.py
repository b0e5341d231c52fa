"""The generic operator runtime, shared by every operator here: the watch-fed object cache
(`cache`), /metrics and /healthz (`http_endpoints`), text and JSON logs keyed by object (`logs`).
Knows no etcd; talks to Kubernetes only through `kube_adapter`.
"""
