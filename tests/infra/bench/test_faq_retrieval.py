"""The FAQ retrieval set and its metric, on a page shaped like Sphinx's FAQ pages."""
import numpy as np
import pytest
from faq_retrieval import load_faq, ndcg_at_10

PAGE = """<html><h2>General<a class="headerlink">¶</a></h2><p>Intro, not a question.</p>
<h3>Why is the sky blue?<a class="headerlink">¶</a></h3><p>Rayleigh scattering of sunlight by the air &amp; dust.</p>
<h3>What is a list?</h3><p>A mutable sequence of items, written with square brackets.</p></html>"""


def test_questions_become_queries_and_their_answers_passages(tmp_path):
    (tmp_path / "general.html").write_text(PAGE, encoding="utf-8")
    (tmp_path / "index.html").write_text("<h3>Ignored?</h3><p>the table of contents</p>", encoding="utf-8")
    data = load_faq(tmp_path)
    assert data.queries == ["Why is the sky blue?", "What is a list?"]
    assert data.passages[0] == "Rayleigh scattering of sunlight by the air & dust." and data.relevant == [{0}, {1}]


def test_ndcg_at_10_ranks():
    passages = np.eye(3, dtype=np.float32)
    perfect = ndcg_at_10(passages[:2], passages, [{0}, {1}])
    swapped = ndcg_at_10(passages[[1, 0]], passages, [{0}, {1}])  # the relevant one ranked second
    assert perfect == 1.0 and swapped == pytest.approx(1 / np.log2(3))


def test_an_empty_directory_says_what_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match="python3.11-doc"):
        load_faq(tmp_path)
