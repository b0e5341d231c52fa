# The two commands that matter: `make demo` and `make test`. Both install what they need first.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
SANDBOX := $(PYTHON) -m kube_sandbox

.PHONY: deps demo test unit down status bench typecheck imports lint failure-injection image image-push simulate

deps:
	VENV=$(VENV) bash scripts/install-deps.sh

## Start the sandbox, deploy the three operators as pods in it, run the example 3-member cluster and back it up.
demo: deps
	VENV=$(VENV) bash scripts/demo.sh

## The whole suite (unit tests, and integration tests against the sandbox, in parallel where they
## can share it). CI runs this. TEST_WORKERS sets the parallel workers.
test: deps
	VENV=$(VENV) bash scripts/test.sh

## Fast feedback: the unit tests and the repository checks (lint, types, layers, docs, chart, rules), no sandbox.
unit: deps
	$(PYTHON) -m pytest tests/unit tests/repository

## The planner's fault simulator over many seeds (docs/dev/simulator.md); `make simulate SEEDS=N FIRST=S`.
SEEDS ?= 10000
FIRST ?= 0
simulate: deps
	$(PYTHON) -m tests.simulation --seeds $(SEEDS) --first $(FIRST)

## The failure-injection suite alone (the operator killed before/after each membership effect).
failure-injection: deps
	$(PYTHON) -m pytest -m failure_injection

down:
	$(SANDBOX) down

status:
	$(SANDBOX) status

## Benchmarks: prints a table and writes bench-results.json.
bench: deps
	$(PYTHON) -m benchmarks

typecheck: deps
	$(PYTHON) -m mypy

## Lint and import order (ruff; also checked by tests/repository/).
lint: deps
	$(VENV)/bin/ruff check .

## The layer contracts of setup.cfg [importlinter] (also checked by tests/repository/).
imports: deps
	$(VENV)/bin/lint-imports

## The operators' image, built from the Dockerfile with buildah (no daemon; installed from Debian when
## missing), tagged IMAGE_REPOSITORY (etcd-operator-py):<setup.cfg version>; on local stand-ins for the base images where
## their registries cannot be reached. docs/image.md.
image:
	bash scripts/build-image.sh

## Push it: `make image-push REGISTRY=registry.example.com/team` (after `buildah login`).
image-push: image
	REGISTRY=$(REGISTRY) bash scripts/push-image.sh
