"""A Hub model's card (``README.md``) beside its description files, best effort: ``GET /v1/models`` reads
the Matryoshka sizes it declares from there (``model_card.py``), as from a packaged model's folder.

Not one of the snapshot's patterns (``hub.DESCRIPTION_FILES``): offline, huggingface_hub refuses a
snapshot whose cached file listing names a file a pattern matches and the snapshot lacks
(``IncompleteSnapshotError``), so a host pulled before cards were fetched would stop resolving its
models. It is fetched apart instead, into the same snapshot folder, when the description is resolved
(once per commit and process; ``poolq models pull`` too), online only: a card the cache holds offline is
already in the snapshot folder. Nothing computed depends on a card: a card missing, too large or
unreachable is no error, only logged at debug.
"""
from __future__ import annotations

import logging
from pathlib import Path

from poolq.engine.loading.model_card import MAX_CARD_BYTES

log = logging.getLogger(__name__)

CARD = "README.md"
# The parser reads the first MiB; a card a few times that (long evaluation tables) is still fetched, no more.
MAX_FETCHED_CARD_BYTES = 4 * MAX_CARD_BYTES


def fetch_card(repo_id: str, commit: str, snapshot: Path, cache_dir: Path) -> None:
    """``repo_id``'s card at ``commit`` into ``snapshot`` (its folder in ``cache_dir``), if it has one of a
    card's size and the Hub answers; nothing otherwise."""
    if (snapshot / CARD).is_file():
        return
    try:
        size = _listed_size(repo_id, commit, cache_dir)
        if size is None:
            log.debug("%s@%s has no %s", repo_id, commit, CARD)
        elif size > MAX_FETCHED_CARD_BYTES:
            log.debug("%s@%s: %s is %d bytes, over %d: not fetched", repo_id, commit, CARD, size, MAX_FETCHED_CARD_BYTES)
        else:
            from huggingface_hub import hf_hub_download

            hf_hub_download(repo_id, CARD, revision=commit, cache_dir=cache_dir)
    except Exception as exc:  # noqa: BLE001 - any failure (HTTP, network, disk) leaves the card out, as no card
        log.debug("%s@%s: %s not fetched: %s", repo_id, commit, CARD, exc)


def _listed_size(repo_id: str, commit: str, cache_dir: Path) -> int | None:
    """The card's size in the commit's file listing, as the snapshot's download (online) cached it; None
    when it lists no card, or no listing is cached (the Hub did not list the files: no card then)."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        files = get_cached_repo_tree(repo_id, revision=commit, cache_dir=cache_dir)
    except CachedRepoTreeNotFoundError:
        return None
    return next((file.size for file in files if file.path == CARD), None)
