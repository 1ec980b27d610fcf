"""A BERT-family encoder read from its checkpoint equals the one transformers loads: same parameters,
same packed outputs, bit for bit; what the reader does not cover is left to transformers (None)."""
import subprocess
import sys

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from support.random_models import MINILM_DIR

from poolq.engine.models import PackedBertEncoder
from poolq.engine.models.bert_checkpoint import WEIGHTS_NAME, checkpoint_encoder, covers

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)
FAMILIES = {
    "bert": (transformers.BertConfig, transformers.BertModel, transformers.BertForMaskedLM),
    "roberta": (transformers.RobertaConfig, transformers.RobertaModel, transformers.RobertaForMaskedLM),
    "xlm-roberta": (transformers.XLMRobertaConfig, transformers.XLMRobertaModel, transformers.XLMRobertaForMaskedLM),
}


def _saved(tmp_path, family: str, head: bool = False, **overrides):
    """A seeded random model saved as transformers saves it; returns (dir, its config)."""
    config_class, base_class, head_class = FAMILIES[family]
    torch.manual_seed(0)
    config = config_class(**{**TINY, **overrides})
    (head_class if head else base_class)(config).save_pretrained(tmp_path)
    return tmp_path, transformers.AutoConfig.from_pretrained(tmp_path)


def _hf_base(model_dir, dtype=torch.float32) -> torch.nn.Module:
    return transformers.AutoModel.from_pretrained(str(model_dir), dtype=dtype).eval()


def _packed(encoder_source: torch.nn.Module) -> torch.Tensor:  # [num_tokens, hidden]
    lengths = [5, 1, 40, 17]
    ids = torch.cat([torch.randint(3, TINY["vocab_size"], (n,), generator=torch.Generator().manual_seed(n))
                     for n in lengths])
    positions = torch.cat([torch.arange(n) for n in lengths])
    cu_seqlens = torch.tensor([0, 5, 6, 46, 63], dtype=torch.int32)
    with torch.inference_mode():
        return PackedBertEncoder(encoder_source)(ids, positions, cu_seqlens, max(lengths))


def _base_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.state_dict().items() if not name.startswith("pooler.") and "position_ids" not in name}


@pytest.mark.parametrize("head", [False, True], ids=["base", "saved-with-a-head"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_checkpoint_encoder_has_transformers_parameters_and_outputs(tmp_path, family, head):
    # Given a model of the family saved by transformers, as a base model or with an MLM head ("bert." keys)
    model_dir, config = _saved(tmp_path, family, head=head)
    # When the reader builds it, and transformers loads its base model
    encoder, reference = checkpoint_encoder(model_dir, config, torch.float32), _hf_base(model_dir)
    # Then every base parameter is there, equal, and the packed forward over either is the same, bit for bit
    assert encoder is not None and not encoder.training
    expected = _base_parameters(reference)
    assert encoder.state_dict().keys() == expected.keys()
    assert all(torch.equal(encoder.state_dict()[name], value) for name, value in expected.items())
    assert torch.equal(_packed(encoder), _packed(reference))


def test_a_bfloat16_load_equals_transformers_bfloat16_load(tmp_path):
    model_dir, config = _saved(tmp_path, "bert")
    encoder, reference = checkpoint_encoder(model_dir, config, torch.bfloat16), _hf_base(model_dir, torch.bfloat16)
    assert encoder is not None
    assert {p.dtype for p in encoder.parameters()} == {torch.bfloat16}
    assert torch.equal(_packed(encoder), _packed(reference))


@pytest.mark.parametrize(("family", "overrides"), [
    ("bert", {"hidden_act": "gelu_new"}),  # HF's own tanh formula, not torch's
    ("bert", {"position_embedding_type": "relative_key"}),
    ("bert", {"is_decoder": True}),
])
def test_what_the_reader_does_not_build_exactly_is_left_to_transformers(tmp_path, family, overrides):
    model_dir, config = _saved(tmp_path, family, **overrides)
    assert not covers(config)
    assert checkpoint_encoder(model_dir, config, torch.float32) is None


def test_other_families_are_left_to_transformers(tmp_path):
    config = transformers.MPNetConfig(**TINY)
    transformers.MPNetModel(config).save_pretrained(tmp_path)
    assert checkpoint_encoder(tmp_path, config, torch.float32) is None


def test_a_checkpoint_without_safetensors_or_missing_a_tensor_is_left_to_transformers(tmp_path):
    # Given a checkpoint saved as pytorch_model.bin, and one whose safetensors lacks a layer's weight
    bin_dir, config = _saved(tmp_path / "bin", "bert")
    (bin_dir / WEIGHTS_NAME).unlink()
    partial_dir, _ = _saved(tmp_path / "partial", "bert")
    state = load_file(partial_dir / WEIGHTS_NAME)
    del state["encoder.layer.1.output.dense.weight"]
    save_file(state, partial_dir / WEIGHTS_NAME)
    # Then the reader builds neither: transformers handles .bin files and reports missing weights
    assert checkpoint_encoder(bin_dir, config, torch.float32) is None
    assert checkpoint_encoder(partial_dir, config, torch.float32) is None


def test_loading_the_default_model_imports_no_transformers_modeling_code():
    # The reason the reader exists: transformers' modeling import costs every worker ~2 CPU-seconds.
    script = (
        "import sys\n"
        "from poolq.engine import PoolingEngine\n"
        f"engine = PoolingEngine.from_pretrained({str(MINILM_DIR)!r})\n"
        "assert type(engine.loaded.runner).__name__ == 'PackedRunner'\n"
        "print(sorted(m for m in ('transformers.modeling_utils', 'torch._dynamo') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"
