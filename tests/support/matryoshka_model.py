"""A tiny Matryoshka model as sentence-transformers leaves one: ``tiny_st_bert`` (hidden 32, mean pooling,
Normalize) loaded with ``truncate_dim`` and ``save()``d by sentence-transformers itself, so
``config_sentence_transformers.json`` holds ``truncate_dim`` exactly as it writes it; its card
(``README.md``, also written by ``save()``) gets the training section a ``MatryoshkaLoss`` run adds, its
parameters rendered as sentence-transformers' model card generator renders them
(``base/model_card.py``: ``json.dumps(loss.get_config_dict(), indent=4)`` in an indented json fence).
"""
from __future__ import annotations

import json
from pathlib import Path
from textwrap import indent

from support.hub_cache import tiny_st_bert

LOSS_LINK = "https://sbert.net/docs/package_reference/sentence_transformer/losses.html#matryoshkaloss"


def matryoshka_st_bert(path: Path, seed: int, truncate_dim: int, card_dims: tuple[int, ...] = ()) -> Path:
    """The model saved at ``path / "saved"``; ``card_dims``: the sizes its card says it was trained for."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st_bert(path / "base", seed)), device="cpu", truncate_dim=truncate_dim)
    saved = path / "saved"
    model.save(str(saved))
    if card_dims:
        with (saved / "README.md").open("a", encoding="utf-8") as card:
            card.write(training_section(model, card_dims))
    return saved


def training_section(model, card_dims: tuple[int, ...]) -> str:
    """A card's "Training Details" for a MatryoshkaLoss over MultipleNegativesRankingLoss."""
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    loss = MatryoshkaLoss(model, MultipleNegativesRankingLoss(model), list(card_dims))
    parameters = indent(f"```json\n{json.dumps(loss.get_config_dict(), indent=4)}\n```", "  ")
    return ("\n## Training Details\n\n### Training Dataset\n\n#### Unnamed Dataset\n\n* Size: 8 training samples\n"
            f"* Loss: [<code>MatryoshkaLoss</code>]({LOSS_LINK}) with these parameters:\n{parameters}\n")
