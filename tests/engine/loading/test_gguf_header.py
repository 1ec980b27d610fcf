"""GGUF header metadata without converting: synthetic files for the format, SmolLM2 for the real thing."""
import struct

import pytest

from poolq.engine.loading.gguf_header import read_gguf_metadata, read_gguf_model_spec
from poolq.engine.loading.registry import PACKAGED_MODELS, ModelRegistry
from poolq.engine.model_spec import ModelSpecError, PoolingType


def smollm2_gguf_path():
    return PACKAGED_MODELS["smollm2-135m"].location()


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value_type: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", value_type) + payload


def _gguf(*kvs: bytes, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs)) + b"".join(kvs)


def _llama_header(*extra: bytes) -> bytes:
    return _gguf(
        _kv("general.architecture", 8, _string("llama")),
        _kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + _string("a") + _string("bb") + _string("<s>")),
        _kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.1, 0.2, 0.3)),
        _kv("llama.context_length", 4, struct.pack("<I", 4096)),
        _kv("llama.embedding_length", 4, struct.pack("<I", 256)),
        _kv("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        *extra,
    )


def test_scalars_and_strings_are_read_and_arrays_skipped(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(_llama_header(_kv("general.flag", 7, b"\x01"), _kv("general.big", 10, struct.pack("<Q", 2**40))))
    metadata = read_gguf_metadata(path)
    assert metadata == {
        "general.architecture": "llama", "llama.context_length": 4096, "llama.embedding_length": 256,
        "llama.rope.freq_base": 10000.0, "general.flag": True, "general.big": 2**40,
    }


def test_a_gguf_decoder_is_described_as_a_last_pooling_causal_model(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(_llama_header())
    spec = read_gguf_model_spec(path)
    assert (spec.architecture, spec.hidden_size, spec.window_tokens, spec.max_position_tokens) == (
        "LlamaForCausalLM", 256, 4096, 4096)
    assert spec.pooling is PoolingType.LAST and spec.is_causal and not spec.normalize


@pytest.mark.parametrize("content, message", [
    (b"GGML" + bytes(20), "not a GGUF file"),
    (_gguf(version=1), "version 1 is not supported"),
    (_llama_header()[:-6], "truncated"),
    (_gguf(_kv("general.architecture", 8, _string("mamba"))), "architecture 'mamba' is not supported"),
    (_gguf(_kv("general.architecture", 8, _string("llama"))), "lacks 'llama.embedding_length'"),
    (_gguf(_kv("general.x", 99, b"")), "unknown GGUF value type 99"),
])
def test_bad_headers_are_refused_with_the_reason(tmp_path, content, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelSpecError, match=message) as caught:
        read_gguf_model_spec(path)
    assert str(path) in str(caught.value)


def test_smollm2_header_is_read_from_the_files_first_mebibytes_alone(tmp_path):
    # Given only the first 4 MiB of SmolLM2's 94 MiB GGUF (its header; no tensor data)
    with smollm2_gguf_path().open("rb") as handle:
        head = handle.read(4 << 20)
    (tmp_path / "head.gguf").write_bytes(head)
    # Then the metadata reads the same as from the whole file: nothing past the header is needed
    metadata = read_gguf_metadata(tmp_path / "head.gguf")
    assert metadata == read_gguf_metadata(smollm2_gguf_path())
    assert metadata["general.architecture"] == "llama" and metadata["llama.context_length"] == 8192


def test_registry_describes_an_unconverted_gguf_model_without_converting_it(tmp_path, monkeypatch):
    # Given a registry whose GGUF cache is empty, and a conversion that must not happen
    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", lambda *_: pytest.fail("converted to validate"))
    registry = ModelRegistry(gguf_models={"smollm2-135m": smollm2_gguf_path()}, cache_root=tmp_path / "cache")
    # When it is asked what the model declares
    spec = registry.spec("smollm2-135m")
    # Then it answers from the header, and the cache stays empty
    assert (spec.architecture, spec.hidden_size, spec.window_tokens, spec.pooling) == (
        "LlamaForCausalLM", 576, 8192, PoolingType.LAST)
    assert not (tmp_path / "cache").exists()
