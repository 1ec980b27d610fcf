"""The Matryoshka sizes a model's card declares, as sentence-transformers' card generator writes them
(support/matryoshka_model.py renders a real MatryoshkaLoss's parameters), read tolerantly: a card that is
missing, unreadable or odd gives no sizes, never an error."""
from pprint import pformat
from textwrap import indent

import pytest
from support.hub_cache import tiny_st_bert
from support.matryoshka_model import training_section

from poolq.engine.loading.model_card import MAX_CARD_BYTES, matryoshka_dimensions


@pytest.fixture(scope="module")
def st_model(tmp_path_factory):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_st_bert(tmp_path_factory.mktemp("card-model"), seed=2)), device="cpu")


def test_the_sizes_of_a_matryoshka_loss_in_the_card_with_truncate_dim(st_model, tmp_path):
    (tmp_path / "README.md").write_text("---\nlibrary_name: sentence-transformers\n---\n# A model\n"
                                        + training_section(st_model, (32, 8, 16)))
    assert matryoshka_dimensions(tmp_path) == (32, 16, 8)
    assert matryoshka_dimensions(tmp_path, truncate_dim=12) == (32, 16, 12, 8)
    assert matryoshka_dimensions(tmp_path, truncate_dim=16) == (32, 16, 8)  # each once


def test_every_dataset_s_loss_counts_and_pformat_configs_too(st_model, tmp_path):
    """A card lists one loss per training dataset; where JSON could not hold a loss's config the
    generator writes Python's pformat (a tuple, single quotes)."""
    pformatted = indent(f"```json\n{pformat({'loss': 'CoSENTLoss', 'matryoshka_dims': (24, 4)}, indent=4)}\n```", "  ")
    (tmp_path / "README.md").write_text(training_section(st_model, (32, 16)) + "\n#### Another Dataset\n" + pformatted)
    assert matryoshka_dimensions(tmp_path) == (32, 24, 16, 4)


def test_a_card_without_sizes_or_without_a_card_gives_none(tmp_path):
    assert matryoshka_dimensions(tmp_path) == ()
    assert matryoshka_dimensions(tmp_path, truncate_dim=64) == (64,)
    (tmp_path / "README.md").write_text("# A model\nTrained with Matryoshka; matryoshka_dims are in the paper.\n")
    assert matryoshka_dimensions(tmp_path) == ()


@pytest.mark.parametrize("card, sizes", [
    (b"\xff\xfe not utf-8 \"matryoshka_dims\": [\n 64,\n 32\n]", (64, 32)),
    (b'"matryoshka_dims": [0, 64, 1' + b"0" * 5000 + b"]", (64,)),  # no size, and a number int() would refuse
    (b'"matryoshka_dims": [64, "x", 32]', ()),  # not a list of numbers: left out whole
])
def test_odd_cards_never_fail(tmp_path, card, sizes):
    (tmp_path / "README.md").write_bytes(card)
    assert matryoshka_dimensions(tmp_path) == sizes


def test_an_unreadable_card_gives_none(tmp_path):
    (tmp_path / "README.md").mkdir()
    assert matryoshka_dimensions(tmp_path) == ()
    assert matryoshka_dimensions(tmp_path / "model.gguf") == ()  # a model that is one file


def test_the_read_is_bounded(tmp_path):
    (tmp_path / "README.md").write_text("x" * MAX_CARD_BYTES + '"matryoshka_dims": [64, 32]')
    assert matryoshka_dimensions(tmp_path) == ()
