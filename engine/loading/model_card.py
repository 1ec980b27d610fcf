"""The Matryoshka sizes a model declares: its ``truncate_dim``, and the sizes it was trained for, from its
card (``README.md``) as sentence-transformers' model card generator writes it. A model trained with
``MatryoshkaLoss`` (or ``Matryoshka2dLoss``) has the loss's parameters there as JSON,
``"matryoshka_dims": [768, 512, 256, 128, 64]`` (one number a line), or, where JSON could not hold
the loss's config, as Python's ``pformat``: ``'matryoshka_dims': (768, 512, ...)``.

For listing only (``GET /v1/models``): nothing computed depends on a card, which is free text. So the
read is bounded, the parse tolerant, and a card missing, unreadable or declaring nothing gives no sizes.
"""
from __future__ import annotations

import re
from pathlib import Path

MAX_CARD_BYTES = 1 << 20  # cards run to tens of kB (evaluation tables); the loss config sits past them
_MAX_DIGITS = 9  # no model has a billion dimensions; a longer number is no size (nor int()-able past 4300 digits)
_MATRYOSHKA_DIMS = re.compile(r"""["']matryoshka_dims["']\s*:\s*[\[(]([\d\s,]*)[\])]""")


def matryoshka_dimensions(model_dir: Path, truncate_dim: int | None = None) -> tuple[int, ...]:
    """The sizes ``model_dir``'s card declares, with ``truncate_dim`` (the model's default size), largest
    first, each once; ``()`` when neither declares any."""
    sizes = set(_card_sizes(model_dir / "README.md"))
    if truncate_dim is not None:
        sizes.add(truncate_dim)
    return tuple(sorted(sizes, reverse=True))


def _card_sizes(card: Path) -> list[int]:
    if not card.is_file():  # no card (a Hub snapshot has one only where the Hub gave it: hub_card.py), or no plain file
        return []
    try:
        with card.open("rb") as handle:
            text = handle.read(MAX_CARD_BYTES).decode("utf-8", errors="replace")
    except OSError:  # unreadable: no sizes, as no card
        return []
    numbers = [number for found in _MATRYOSHKA_DIMS.findall(text) for number in found.replace(",", " ").split()]
    return [int(number) for number in numbers if len(number) <= _MAX_DIGITS and int(number) > 0]
