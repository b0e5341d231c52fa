"""Count the requests kube-apiserver has served, from its own `apiserver_request_total` counter
(GET /metrics with the sandbox's admin token), and the rate over a window of time."""
from __future__ import annotations

import ssl
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from kube_sandbox.config import SandboxConfig

REQUEST_COUNTER = "apiserver_request_total"
SCRAPE_TIMEOUT_SECONDS = 10.0

# (verb, group/resource/subresource or the non-resource path) -> requests served
RequestKind = tuple[str, str]


def scrape_request_counts(config: SandboxConfig) -> tuple[float, Counter[RequestKind]]:
    """(time.monotonic() when the scrape was sent, apiserver_request_total summed over codes, scopes
    and content types, per request kind)."""
    context = ssl.create_default_context(cafile=str(config.ca_cert))
    token = config.admin_token_file.read_text().strip()
    request = urllib.request.Request(f"{config.apiserver_url}/metrics",
                                     headers={"Authorization": f"Bearer {token}"})
    sent = time.monotonic()
    with urllib.request.urlopen(request, context=context, timeout=SCRAPE_TIMEOUT_SECONDS) as response:
        text = response.read().decode()
    counts: Counter[RequestKind] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != REQUEST_COUNTER:
                continue
            labels = sample.labels
            target = "/".join(p for p in (labels.get("group"), labels.get("resource"), labels.get("subresource")) if p)
            counts[(labels.get("verb", ""), target)] += int(sample.value)
    return sent, counts


@dataclass(frozen=True)
class RequestRate:
    seconds: float
    by_kind: Counter[RequestKind]  # requests served during the window

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    @property
    def per_second(self) -> float:
        return self.total / self.seconds

    def breakdown(self, top: int = 8) -> str:
        return ", ".join(f"{verb} {target}: {count}" for (verb, target), count in self.by_kind.most_common(top))

    def excess_over(self, baseline: RequestRate, top: int = 8) -> str:
        """Request kinds served more often per second here than in `baseline`, largest first."""
        kinds = set(self.by_kind) | set(baseline.by_kind)
        excess = {k: self.by_kind[k] / self.seconds - baseline.by_kind[k] / baseline.seconds for k in kinds}
        ranked = sorted((item for item in excess.items() if item[1] > 0), key=lambda item: -item[1])[:top]
        return ", ".join(f"{verb} {target}: {rate:.3f}" for (verb, target), rate in ranked) or "none"


def measure_request_rate(config: SandboxConfig, window_seconds: float) -> RequestRate:
    """Requests per second kube-apiserver served over the next `window_seconds` (from all clients;
    one of this window's two scrapes is included, as in any other window measured this way)."""
    started, before = scrape_request_counts(config)
    remaining = started + window_seconds - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)  # the measurement window itself; nothing is waited for
    ended, after = scrape_request_counts(config)
    served = Counter({kind: after[kind] - before.get(kind, 0) for kind in after if after[kind] > before.get(kind, 0)})
    return RequestRate(ended - started, served)
