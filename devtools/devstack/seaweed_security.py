"""SeaweedFS's own security for a dev-stack ``weed mini``: only the S3 endpoint serves data.

``weed mini`` also listens for its master, volume server, filer and admin server, on loopback,
where every local user can connect. Without this, the filer serves every object (every tenant's
documents and vectors, every key record) to anyone, and takes writes from anyone. So each start
writes a fresh ``security.toml`` (weed reads it from its working directory, the data directory):

- gRPC (every component's, and their unix sockets) is mutual TLS: a CA made here signs one
  certificate that every component presents and requires; the CA's private key is dropped at
  once, so no other certificate it trusts can ever be made.
- HTTP: JWT signing keys for the volume server (writes and reads: it answers 401 "wrong jwt"
  without one) and for the filer; weed runs with ``-disableHttp``, so the filer's and master's
  HTTP APIs are off (404), leaving the master's status page, which shows no data.
- S3 requires the access key and secret of the identities file.

The keys and certificates are random per start and live in ``<data_dir>/security`` (0700,
files 0600), readable only by the stack's owner, who can read the data directory anyway.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from poolq.devtools.devstack.private_files import private_dir, write_private

#: The [grpc.<component>] sections of security.toml: each component serves and dials with the one certificate.
GRPC_COMPONENTS = ("master", "volume", "filer", "s3", "admin", "worker", "msg_broker", "msg_agent", "mq")
#: The JWT sections: volume writes and reads (the master mints these), filer writes and reads (S3 mints these).
JWT_SECTIONS = ("jwt.signing", "jwt.signing.read", "jwt.filer_signing", "jwt.filer_signing.read")
CERT_VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class SeaweedSecurity:
    """The security configuration of one ``weed mini``, written under ``data_dir``."""

    data_dir: Path

    @property
    def config_path(self) -> Path:
        """Where weed looks first: ``./security.toml`` of its working directory."""
        return self.data_dir / "security.toml"

    @property
    def directory(self) -> Path:
        return self.data_dir / "security"

    def write(self) -> None:
        """Fresh keys and certificates, and the security.toml naming them."""
        directory = private_dir(self.directory)
        ca_cert, cert_pem, key_pem = _certificates()
        paths = {"ca": directory / "ca.crt", "cert": directory / "weed.crt", "key": directory / "weed.key"}
        write_private(paths["ca"], ca_cert)
        write_private(paths["cert"], cert_pem)
        write_private(paths["key"], key_pem)
        write_private(self.config_path, _toml(paths))


def _toml(paths: dict[str, Path]) -> str:
    def quoted(value: object) -> str:
        return json.dumps(str(value))  # a TOML basic string: JSON's escapes

    lines = ["# Written by poolq's dev stack at each start (devtools/devstack/seaweed_security.py); do not edit."]
    for section in JWT_SECTIONS:
        lines += [f"[{section}]", f"key = {quoted(secrets.token_urlsafe(32))}", "expires_after_seconds = 10"]
    lines += ["[access]", "ui = false", "[filer.expose_directory_metadata]", "enabled = false"]
    lines += ["[grpc]", f"ca = {quoted(paths['ca'].resolve())}"]
    for component in (*GRPC_COMPONENTS, "client"):
        lines += [f"[grpc.{component}]", f"cert = {quoted(paths['cert'].resolve())}", f"key = {quoted(paths['key'].resolve())}"]
    return "\n".join(lines) + "\n"


def _certificates() -> tuple[str, str, str]:
    """(CA certificate, leaf certificate, leaf key) in PEM; the CA's key is never kept."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"poolq dev SeaweedFS CA {secrets.token_hex(4)}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "poolq-weed")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return ca.public_bytes(pem).decode(), leaf.public_bytes(pem).decode(), key_pem.decode()
