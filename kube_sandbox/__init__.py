"""A small local Kubernetes for tests and demos: real control plane, pods run as local processes."""
