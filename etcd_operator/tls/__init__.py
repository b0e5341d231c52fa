"""TLS material of an EtcdCluster: the certificates the operator issues (`certificates.py`), static and
cert-manager Secrets checked (`static.py`, `cert_manager.py`), CA rotation (`ca_rotation.py`) and moves
to or off TLS (`transition.py`). No planning here: etcd_operator/planning/tls.py decides."""
