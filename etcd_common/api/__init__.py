"""The three kinds' API (CoreOS etcd.database.coreos.com/v1beta2) parsed at the edge into frozen
dataclasses, one module per kind over a field-reading base; names, constants and resources."""
