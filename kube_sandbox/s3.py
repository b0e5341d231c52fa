"""The sandbox's S3 server: SeaweedFS `weed mini` on loopback, with one access key and secret."""
from __future__ import annotations

import json

from kube_sandbox import binaries
from kube_sandbox.config import HOST_IP, SandboxConfig
from kube_sandbox.processes import ManagedProcess


def s3_server(config: SandboxConfig) -> ManagedProcess:
    directory = config.state_dir / "s3"
    (directory / "data").mkdir(parents=True, exist_ok=True)
    identities = {"identities": [{
        "name": "sandbox",
        "credentials": [{"accessKey": config.s3_access_key, "secretKey": config.s3_secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}
    (directory / "s3.json").write_text(json.dumps(identities))
    port = config.s3_port
    return ManagedProcess("s3 (weed mini)", [
        str(binaries.weed()), "mini", f"-dir={directory / 'data'}",
        f"-ip={HOST_IP}", f"-ip.bind={HOST_IP}",
        f"-s3.port={port}", f"-master.port={port + 1}", f"-volume.port={port + 2}",
        f"-filer.port={port + 3}", f"-webdav.port={port + 4}", f"-admin.port={port + 5}",
        "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false",  # never phone home
        f"-s3.config={directory / 's3.json'}",
    ], config.logs_dir / "s3.log")
