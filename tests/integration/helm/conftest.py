"""The operator deployed from this checkout (the etcd operator tests' fixtures)."""
from tests.integration.etcd_operator.conftest import clusters, operator  # noqa: F401  (pytest fixtures)
