"""What `poolq dev up` started, persisted as JSON so `status` and `down` can find it."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Each port of ``StackState.ports``, the URL field it is part of, and that URL's form.
_URLS = {"redis": ("redis_url", "redis://127.0.0.1:{}/0"), "s3": ("s3_endpoint", "http://127.0.0.1:{}"),
         "api": ("api_url", "http://127.0.0.1:{}")}


@dataclass
class StackState:
    """Endpoints, credentials and pids of a local stack. Written to ``<state_dir>/stack.json``.

    ``ports`` are the ports the services listen on (0 until a service asked for any port has
    one); the URLs follow them (``use_port``).
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

    @classmethod
    def load(cls, path: Path) -> "StackState | None":
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def use_port(self, name: str, port: int) -> None:
        """Record that service port ``name`` (redis, s3, api) is ``port``, in ``ports`` and its URL."""
        field_name, url = _URLS[name]
        self.ports[name] = port
        setattr(self, field_name, url.format(port))

    def save(self, path: Path) -> None:
        """Readable by its owner only: it holds the stack's admin API key and S3 secret."""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(self), indent=2))
        os.chmod(tmp, 0o600)  # an existing file keeps its mode through O_CREAT
        tmp.replace(path)

    def env(self) -> dict[str, str]:
        """POOLQ_* settings for the API and worker processes of this stack."""
        return {
            "POOLQ_REDIS_URL": self.redis_url,
            "POOLQ_STORE": "s3",
            "POOLQ_BUCKET": self.bucket,
            "POOLQ_S3_ENDPOINT_URL": self.s3_endpoint,
            "POOLQ_S3_ACCESS_KEY_ID": self.access_key_id,
            "POOLQ_S3_SECRET_ACCESS_KEY": self.secret_access_key,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
