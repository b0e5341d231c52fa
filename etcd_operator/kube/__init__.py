"""The only package that talks to the Kubernetes API.

`client` (configuration, calling the API), `errors` (what failures mean, what is retried),
`watching` (list+watch loops), `resources` (EtcdClusters, Pods, Services, PVCs), `patching`
(status writes with conflict retry), `events` (Kubernetes Events), `leadership` (Lease-based
leader election). Everything crossing this boundary is a plain API dict.
"""
