"""What `poolq dev up` started, persisted as JSON so `status` and `down` can find it."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class StackState:
    """Endpoints, credentials and pids of a local stack. Written to ``<state_dir>/stack.json``."""

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

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")
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
