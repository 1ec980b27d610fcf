"""The engine computes what sentence-transformers computes, family by family, for models named by Hub
id: each family's test model (support/hub_models.py: saved by sentence-transformers itself, with its
real model's prompts and modules) loaded from its Hub-cache snapshot by both, queries encoded with
``prompt_name="query"``, documents with the model's default.

Random weights make raw cosines of any two texts near 1, so vectors are compared after removing the
batch's mean vector (centred cosines), where a wrong prompt or pooling shows at once.
"""
import numpy as np
import pytest
from support.hub_models import FAMILIES, publish_family, snapshot_dir

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingParams, PoolingRequest, PoolingTask
from poolq.engine.tokenizer import TextTokenizer

QUERIES = ["What is the capital of France?", "how tall is the eiffel tower", "Who wrote Les Misérables?",
           "best way to learn Python", "capital", "Why is the sky blue during the day but red at sunset?",
           "BERT vs GPT embeddings", "weather tomorrow in Lyon"]
DOCUMENTS = ["Paris is the capital and largest city of France.",
             "The Eiffel Tower, built in 1889 for the World's Fair, is 330 metres tall.",
             "Victor Hugo published Les Misérables in 1862; it follows Jean Valjean over twenty years.",
             "Python is easiest to learn by writing small programs every day and reading other people's code.",
             "Rayleigh scattering makes short blue wavelengths dominate the daytime sky.", "A.",
             "Transformers embed text into vectors: POOLING turns token states into one vector per text, " * 3,
             "Lyon: rain in the morning, sunny spells later."]
WORDS = " ".join(["the cat sat on the mat and looked at the dog"] * 5)  # 55 words, one token each


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf-home")
    for name in FAMILIES:
        publish_family(home, name)
    return home


@pytest.fixture(scope="module")
def loaded(hub):
    """``loaded(name)``: (sentence-transformers' model, the engine), float32, each loaded once."""
    from sentence_transformers import SentenceTransformer

    models: dict[str, tuple] = {}

    def load(name):
        if name not in models:
            snapshot = snapshot_dir(hub, FAMILIES[name].repo_id)
            models[name] = (SentenceTransformer(str(snapshot), device="cpu"),
                            PoolingEngine.from_pretrained(snapshot, dtype="float32"))
        return models[name]

    return load


def _centred_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a - a.mean(0), b - b.mean(0)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _engine_vectors(engine, texts, **params) -> np.ndarray:
    return np.stack(engine.encode(texts, PoolingTask.EMBED, PoolingParams(**params)))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_queries_and_documents_equal_sentence_transformers(loaded, name):
    st, engine = loaded(name)
    queries = _engine_vectors(engine, QUERIES, prompt_name="query")
    assert _centred_cosines(queries, st.encode(QUERIES, prompt_name="query")).min() >= 0.9999
    documents = engine.embed(DOCUMENTS)  # the model's default prompt, as sentence-transformers' encode
    assert _centred_cosines(documents, st.encode(DOCUMENTS)).min() >= 0.9999


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_bfloat16_stays_close_to_sentence_transformers(hub, loaded, name):
    st, _ = loaded(name)
    engine = PoolingEngine.from_pretrained(snapshot_dir(hub, FAMILIES[name].repo_id), dtype="bfloat16")
    queries = _engine_vectors(engine, QUERIES, prompt_name="query")
    assert _centred_cosines(queries, st.encode(QUERIES, prompt_name="query")).min() >= 0.999


def test_without_its_prompt_a_query_is_far_from_sentence_transformers(loaded):
    """The check above can fail: the prompted families' queries embedded with no prompt."""
    prompted = [name for name, family in sorted(FAMILIES.items()) if family.prompts.get("query")]
    assert len(prompted) >= 6
    for name in prompted:
        st, engine = loaded(name)
        reference = st.encode(QUERIES, prompt_name="query")
        assert _centred_cosines(_engine_vectors(engine, QUERIES, prompt=""), reference).min() < 0.9, name
        # and a literal prompt is the named one's text
        literal = _engine_vectors(engine, QUERIES, prompt=FAMILIES[name].prompts["query"])
        assert _centred_cosines(literal, reference).min() >= 0.9999, name


def test_a_model_that_pools_without_its_prompt_leaves_it_out(loaded):
    st, engine = loaded("bert-instructor")
    assert engine.spec.include_prompt is False and engine.spec.default_prompt_name == "document"
    vectors = engine.embed(DOCUMENTS)
    st.set_pooling_include_prompt(True)  # what pooling the prompt too would give
    try:
        assert _centred_cosines(vectors, st.encode(DOCUMENTS)).min() < 0.99
    finally:
        st.set_pooling_include_prompt(False)


def test_lower_casing_from_sentence_bert_config(hub, loaded):
    """The cased tokenizer with do_lower_case: the equality above holds for texts with capitals only
    because the engine lower-cases them too (cased, they tokenize to other ids)."""
    _, engine = loaded("bert-cased-lower")
    cased = TextTokenizer(snapshot_dir(hub, FAMILIES["bert-cased-lower"].repo_id), lower_case=False)
    lowered = [text.lower() for text in QUERIES]
    assert cased.count_and_tokenize(QUERIES) != cased.count_and_tokenize(lowered)
    np.testing.assert_allclose(engine.embed(QUERIES), engine.embed(lowered), atol=1e-6)


@pytest.mark.parametrize("name", ["bert-e5", "bert-instructor", "qwen3-embed", "mistral-sgpt"])
def test_chunked_embeds_every_window_with_the_prompt(loaded, name):
    """Each window equals sentence-transformers' vector of the prompt + that window's words; the
    document's vector is their token-weighted mean (renormalized where the model normalizes)."""
    st, engine = loaded(name)
    prompt_name = "query" if FAMILIES[name].prompts.get("query") else None  # else the default prompt
    prompt = st.prompts[prompt_name or st.default_prompt_name]
    (result,) = engine.run([PoolingRequest(0, WORDS, params=PoolingParams(prompt_name=prompt_name))],
                           LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=24))
    room = 24 - 2 - len(engine.tokenizer.prompt_ids(prompt))  # [CLS] prompt words [SEP]
    words = WORDS.split()
    pieces = [" ".join(words[start:start + room]) for start in range(0, len(words), room)]
    sizes = np.array([len(st.tokenize([prompt + piece])["input_ids"][0]) for piece in pieces], dtype=np.float64)
    expected = (st.encode(pieces, prompt=prompt) * sizes[:, None]).sum(0) / sizes.sum()
    if engine.spec.normalize:
        expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(result.data, expected, atol=2e-5)
    assert (result.num_tokens, result.processed_tokens) == (len(st.tokenize([prompt + WORDS])["input_ids"][0]), sizes.sum())


def test_naive_chunks_equal_sentence_transformers_per_chunk(loaded):
    st, engine = loaded("qwen3-embed")  # a decoder pooling its last token: the chunk's own [SEP]
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, window_tokens=64, chunk_tokens=20)
    (rows,) = engine.encode([WORDS], PoolingTask.EMBED, PoolingParams(prompt_name="query"), policy)
    words = WORDS.split()
    chunks = [" ".join(words[start:start + 20]) for start in range(0, len(words), 20)]
    np.testing.assert_allclose(rows, st.encode(chunks, prompt_name="query"), atol=2e-5)


def test_late_chunks_pool_states_of_the_prompted_document_without_the_prompt(loaded):
    st, engine = loaded("bert-e5")
    policy = LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, chunk_tokens=20)
    (result,) = engine.run([PoolingRequest(0, WORDS, params=PoolingParams(prompt_name="query"))], policy)
    states = st.encode(WORDS, prompt_name="query", output_value="token_embeddings").numpy()  # [CLS] query : ... [SEP]
    assert [(chunk.token_start, chunk.token_end) for chunk in result.chunks] == [(3, 23), (23, 43), (43, 59)]
    expected = np.stack([states[chunk.token_start:chunk.token_end].mean(0) for chunk in result.chunks])
    np.testing.assert_allclose(result.data, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=2e-5)


def test_token_embed_without_normalize_equals_sentence_transformers_token_embeddings(minilm_engine, st_minilm):
    """token_embed normalizes each token by default (vLLM's token_embed); ``normalize=False`` gives
    sentence-transformers' ``output_value="token_embeddings"`` (its Normalize touches the sentence vector only)."""
    text = "a fox in the snow"
    (got,) = minilm_engine.encode([text], PoolingTask.TOKEN_EMBED, PoolingParams(normalize=False))
    reference = st_minilm.encode([text], output_value="token_embeddings")[0].numpy()
    np.testing.assert_allclose(got, reference, atol=1e-4)
    (normalized,) = minilm_engine.encode([text], PoolingTask.TOKEN_EMBED)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, atol=1e-5)
