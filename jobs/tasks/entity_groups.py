"""Entities from per-token labels, grouped the way users know from transformers' token
classification pipeline with ``aggregation_strategy="simple"``: a ``B-`` tag starts an entity,
an ``I-`` tag (or an untagged label) continues one of the same type, ``O`` is no entity; an
entity's score is the mean of its tokens' scores and its span runs from its first token's start
to its last token's end. Special tokens are not part of any entity."""
from __future__ import annotations

from dataclasses import dataclass

OUTSIDE = "O"


@dataclass(frozen=True)
class TaggedToken:
    label: str
    score: float
    char_start: int
    char_end: int


def split_tag(label: str) -> tuple[str, str]:
    """(``B`` or ``I``, entity type); a label without a B-/I- prefix continues (``I``)."""
    if label.startswith("B-"):
        return "B", label[2:]
    if label.startswith("I-"):
        return "I", label[2:]
    return "I", label


def group_entities(tokens: list[TaggedToken]) -> list[dict]:
    """``[{"label", "char_start", "char_end", "score"}]`` in text order, ``O`` groups left out."""
    groups: list[list[TaggedToken]] = []
    for token in tokens:
        if groups:
            bi, tag = split_tag(token.label)
            _, last_tag = split_tag(groups[-1][-1].label)
            if tag == last_tag and bi != "B":
                groups[-1].append(token)
                continue
        groups.append([token])
    entities = []
    for group in groups:
        label = split_tag(group[0].label)[1]
        if label != OUTSIDE:
            entities.append({"label": label, "char_start": group[0].char_start, "char_end": group[-1].char_end,
                             "score": sum(token.score for token in group) / len(group)})
    return entities
