"""The Kubernetes adapter: the only package that imports `kubernetes`, and it knows nothing of
etcd or of any custom resource.

`client` (configuration, calling the API), `errors` (what failures mean, what is retried),
`resources` (one `Resource` reference and one `ResourceClient` for any kind), `watching`
(list+watch loops), `patching` (status writes), `events` (Kubernetes Events), `leadership`
(Lease-based leader election). Everything crossing this boundary is a plain API dict.
"""
