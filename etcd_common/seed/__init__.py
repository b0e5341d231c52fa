"""The seed member restored from a snapshot: its pod's restore init containers (`pod`, pure builders)
and `etcd-restore-seed`, the program they run (`program`)."""
