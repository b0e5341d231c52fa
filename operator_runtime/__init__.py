"""The generic operator runtime, shared by every operator here: an operator's command in one
call (`entry`), `run_operator` (`running`) with the shared flags (`flags`); a controller for one
primary kind and the kinds it owns (`controller`), a thread per object (`worker`) and the
watch-fed caches (`cache`); /metrics and /healthz (`http_endpoints`); text and JSON logs keyed by
object (`logs`).
Knows no etcd; talks to Kubernetes only through `kube_adapter`.
"""
