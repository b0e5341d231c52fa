#!/usr/bin/env bash
# The whole suite (`make test`, CI): the image (scripts/build-image.sh), then the unit tests, the
# repository checks (tests/repository/) and the integration tests against one sandbox, in three
# phases.
#   1. every test that can run beside others, spread over $TEST_WORKERS pytest-xdist workers
#      (each integration test in its own namespace, with its own names);
#   2. the tests marked `alone` (they restart the apiserver, stop a node or S3, or stop, restart or
#      reconfigure an operator), one at a time per sandbox, on $TEST_ALONE_SANDBOXES sandboxes at
#      once: the first, and extra ones started while phase 1 runs (tests/sandbox_sharing.py);
#   3. the tests marked `latency` (etcd's own latency thresholds judge them: tests/check_perf.py),
#      one at a time on the first sandbox, the extra ones stopped, so that no other test's load
#      decides them.
# Each phase prints its 25 slowest tests. Arguments are passed to every pytest run.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${VENV:-.venv}/bin/python"
WORKERS="${TEST_WORKERS:-4}"
ALONE_SANDBOXES="${TEST_ALONE_SANDBOXES:-2}"

# The operators' image, which tests/integration/packaging/test_image.py runs with runc: built here,
# before the workers start (the first build takes minutes; after that, seconds from buildah's layer
# cache while the packages are unchanged, about a minute when they changed: pip reinstalls).
image_start=$SECONDS
if bash scripts/build-image.sh >/dev/null; then
  echo "=== image: $(( SECONDS - image_start )) s"
else
  echo "=== image build failed after $(( SECONDS - image_start )) s (the image tests say why)"
fi

stop_sandboxes=() stop_extras=()
trap 'for stop in "${stop_extras[@]}" "${stop_sandboxes[@]}"; do eval "$stop" >/dev/null; done' EXIT
if ! "$PYTHON" -m kube_sandbox status >/dev/null 2>&1; then
  "$PYTHON" -m kube_sandbox up || exit 1
  stop_sandboxes+=('"$PYTHON" -m kube_sandbox down')
fi

# The alone phase's extra sandboxes start now, beside phase 1; each is waited for before phase 2.
extra_pids=() extra_logs=()
for (( index = 1; index < ALONE_SANDBOXES; index++ )); do
  extra_env=$("$PYTHON" -m tests.sandbox_sharing extra-env "$index") || exit 1
  extra_logs+=("$(mktemp -t "sandbox-up-$index.XXXXXX.log")")
  if env $extra_env "$PYTHON" -m kube_sandbox status >/dev/null 2>&1; then
    extra_pids+=("")
    continue
  fi
  env $extra_env "$PYTHON" -m kube_sandbox up >"${extra_logs[index - 1]}" 2>&1 &
  extra_pids+=("$!")
  stop_extras+=("env $extra_env '$PYTHON' -m kube_sandbox down")
done

run_phase() {
  local name=$1; shift
  local start=$SECONDS status
  echo "=== $name"
  "$PYTHON" -m pytest --durations=25 "$@"
  status=$?
  echo "=== $name: exit $status in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
  return "$status"
}

suite_start=$SECONDS
run_phase "tests that share the sandbox, $WORKERS workers" -n "$WORKERS" --dist worksteal -m "not alone" "$@"
shared=$?
# pytest exits 0 or 1 when its tests ran; anything else (interrupted, a usage or internal error, no
# test collected, killed by a signal) ends the suite here: phase 2 would act on a sandbox nobody watches.
if [ "$shared" -gt 1 ]; then
  echo "=== suite stopped: the shared phase ended with exit $shared"
  exit "$shared"
fi
ready=1
for (( index = 1; index < ALONE_SANDBOXES; index++ )); do
  pid=${extra_pids[index - 1]}
  if [ -n "$pid" ] && ! wait "$pid"; then
    echo "=== extra sandbox $index did not start; the alone phase runs on the first only. ${extra_logs[index - 1]}:"
    tail -20 "${extra_logs[index - 1]}"
    ready=0
  fi
done
if [ "$ALONE_SANDBOXES" -gt 1 ] && [ "$ready" = 1 ]; then
  run_phase "tests that run alone, on $ALONE_SANDBOXES sandboxes" -n "$ALONE_SANDBOXES" --dist worksteal \
    --sandbox-per-worker -m "alone and not latency" "$@"
else
  run_phase "tests that run alone" -p no:xdist -m "alone and not latency" "$@"
fi
alone=$?
# The extra sandboxes this script started stop now: the latency tests run with nothing beside them.
for stop in "${stop_extras[@]}"; do eval "$stop" >/dev/null 2>&1; done
stop_extras=()
run_phase "latency tests, one at a time, nothing else running" -p no:xdist -m latency "$@"
latency=$?
echo "=== suite: $(( (SECONDS - suite_start) / 60 )) min $(( (SECONDS - suite_start) % 60 )) s" \
  "(shared phase exit $shared, alone phase exit $alone, latency phase exit $latency)"
[ "$shared" = 0 ] && [ "$alone" = 0 ] && [ "$latency" = 0 ]
