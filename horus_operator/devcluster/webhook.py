"""A serving certificate for the operator's pod webhook on the local control plane (openssl, as the
service-account key): the API server calls the webhook at https://127.0.0.1:<port>, and trusts this
self-signed certificate as the configuration's caBundle. On a real cluster the certificate comes from
the platform's issuer (manifests-pod-route/).

kopf can sign one itself, through the `certbuilder` package; its `oscrypto` dependency cannot read the
version of OpenSSL 3.0.10 and later (two-digit patch numbers), so the operator takes files instead.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from horus_operator.devcluster.components import LOOPBACK


def serving_certificate(
    directory: Path, hosts: tuple[str, ...] = (LOOPBACK, "localhost")
) -> tuple[Path, Path]:
    """(certificate, key) in `directory`, PEM, valid for `hosts` (IP addresses or DNS names) for a year."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "webhook.crt", directory / "webhook.key"
    names = ",".join(f"IP:{host}" if host[0].isdigit() else f"DNS:{host}" for host in hosts)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "365",
            "-subj",
            "/CN=horus-webhook",
            "-addext",
            f"subjectAltName={names}",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    key.chmod(0o600)
    return cert, key
