"""What `poolq dev up` started, persisted as JSON so `status` and `down` can find it."""
from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

from poolq.devtools.devstack.private_files import write_private

#: Each port of ``StackState.ports``, the URL field it is part of, and that URL's form.
_URLS = {"redis": ("redis_url", "redis://{auth}127.0.0.1:{port}/0"), "s3": ("s3_endpoint", "http://127.0.0.1:{port}"),
         "api": ("api_url", "http://127.0.0.1:{port}")}
#: The user name `poolq flower` asks for on a dev stack (the password is random per stack).
FLOWER_USER = "poolq"


def new_secret() -> str:
    """A random secret of 256 bits, URL-safe (it goes into URLs and ``user:password`` pairs)."""
    return secrets.token_urlsafe(32)


@dataclass
class StackState:
    """Endpoints, credentials and pids of a local stack. Written to ``<state_dir>/stack.json``
    (0600: it holds every secret of the stack; only its owner can read it, so only its owner can
    run `poolq dev status` on it).

    ``ports`` are the ports the services listen on (0 until a service asked for any port has
    one); the URLs follow them (``use_port``); ``redis_url`` carries the password.
    """

    state_dir: str
    api_url: str
    s3_endpoint: str
    bucket: str
    redis_url: str
    access_key_id: str
    secret_access_key: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    api_key: str = ""  # an admin key of tenant "dev", created at the first `up`
    # Secrets a stack made before these existed lacks: `ensure_secrets` adds them.
    redis_password: str = ""
    key_signing_secret: str = ""  # POOLQ_KEY_SIGNING_SECRET of the stack's API
    flower_password: str = ""  # `poolq flower` asks for FLOWER_USER and this

    @classmethod
    def load(cls, path: Path) -> "StackState | None":
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def ensure_secrets(self) -> list[str]:
        """Make the secrets this state lacks; returns their names."""
        made = [name for name in ("redis_password", "key_signing_secret", "flower_password") if not getattr(self, name)]
        for name in made:
            setattr(self, name, new_secret())
        if "redis" in self.ports:
            self.use_port("redis", self.ports["redis"])  # the URL with the password
        return made

    def use_port(self, name: str, port: int) -> None:
        """Record that service port ``name`` (redis, s3, api) is ``port``, in ``ports`` and its URL."""
        field_name, url = _URLS[name]
        self.ports[name] = port
        auth = f":{quote(self.redis_password, safe='')}@" if self.redis_password else ""
        setattr(self, field_name, url.format(port=port, auth=auth))

    @property
    def redis_address(self) -> str:
        """Where Redis listens, without the password: what may be printed."""
        return _URLS["redis"][1].format(port=self.ports.get("redis", 0), auth="")

    @property
    def flower_basic_auth(self) -> str:
        return f"{FLOWER_USER}:{self.flower_password}"

    def save(self, path: Path) -> None:
        """Readable by its owner only: it holds the stack's admin API key and every secret."""
        write_private(path, json.dumps(asdict(self), indent=2))

    def env(self) -> dict[str, str]:
        """POOLQ_* settings for the API of this stack (``worker_env`` for the others)."""
        return {
            "POOLQ_REDIS_URL": self.redis_url,
            "POOLQ_STORE": "s3",
            "POOLQ_BUCKET": self.bucket,
            "POOLQ_S3_ENDPOINT_URL": self.s3_endpoint,
            "POOLQ_S3_ACCESS_KEY_ID": self.access_key_id,
            "POOLQ_S3_SECRET_ACCESS_KEY": self.secret_access_key,
            "POOLQ_KEY_SIGNING_SECRET": self.key_signing_secret,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            # TOKENIZERS_PARALLELISM is left as the caller has it, as deployments leave it unset:
            # a worker's tokenizer spreads each batch over the cores, so a dev stack is timed as one
        }

    def worker_env(self) -> dict[str, str]:
        """``env`` without the key-signing secret: workers and beat never sign or check API keys."""
        return {name: value for name, value in self.env().items() if name != "POOLQ_KEY_SIGNING_SECRET"}

    def cli_env(self) -> dict[str, str]:
        """``env`` plus what only the operator's commands need (`poolq flower`'s credentials)."""
        return {**self.env(), "POOLQ_FLOWER_BASIC_AUTH": self.flower_basic_auth}
