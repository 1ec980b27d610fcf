"""The user's record of local stacks: how the CLI finds a running stack from any directory.

`poolq dev up` (and `poolq demo`) note the stack's state directory here; `poolq dev down` takes
the note away. One small file per stack under ``$XDG_STATE_HOME/poolq/stacks`` (default
``~/.local/state/poolq/stacks``), each naming a state directory and nothing else: the secrets
stay in that directory's ``stack.json``. Private like the stack's own files (0700 folders, 0600
files): which projects a user runs is theirs alone. A note whose stack is gone is harmless: the
finder checks each stack's processes (``LocalStack.running``) and drops notes of stacks that are gone.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from poolq.devtools.devstack.private_files import private_dir, write_private

STATE_HOME_ENV = "XDG_STATE_HOME"


def user_state_dir() -> Path:
    """``$XDG_STATE_HOME/poolq`` (default ``~/.local/state/poolq``): poolq's per-user state."""
    base = os.environ.get(STATE_HOME_ENV) or str(Path.home() / ".local" / "state")
    return Path(base) / "poolq"


class StackRegistry:
    """The state directories of the user's local stacks, one note each."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else user_state_dir() / "stacks"

    def add(self, state_dir: Path) -> Path:
        """Note ``state_dir`` (again: a note is replaced); returns the note's path."""
        private_dir(self.root.parent)  # $XDG_STATE_HOME/poolq itself: 0700 too
        private_dir(self.root)
        note = self._note(state_dir)
        write_private(note, json.dumps({"state_dir": str(Path(state_dir).resolve()),
                                        "noted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        return note

    def remove(self, state_dir: Path) -> None:
        self._note(state_dir).unlink(missing_ok=True)

    def state_dirs(self) -> list[Path]:
        """Every noted state directory, oldest note first (unreadable notes are skipped)."""
        noted = []
        for note in self.root.glob("*.json") if self.root.is_dir() else ():
            try:
                entry = json.loads(note.read_text(encoding="utf-8"))
                noted.append((entry["noted_at"], Path(entry["state_dir"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return [state_dir for _, state_dir in sorted(noted)]

    def _note(self, state_dir: Path) -> Path:
        digest = hashlib.sha256(str(Path(state_dir).resolve()).encode("utf-8")).hexdigest()[:20]
        return self.root / f"{digest}.json"
