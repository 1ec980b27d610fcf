"""The generic padded runner: groups that pad little, outputs in the batch's flat order."""
import numpy as np
import pytest
import torch
import transformers

from poolq.engine.batch import BatchMetadata
from poolq.engine.runners.runner import FREE_PAD_TOKENS, MAX_PAD_SHARE, ModelRunner, padded_groups


def test_a_long_sequence_is_not_padded_with_the_short_ones():
    assert [g.tolist() for g in padded_groups(np.array([6, 1500, 6]))] == [[1], [0, 2]]


def test_short_sequences_share_one_forward():
    assert [g.tolist() for g in padded_groups(np.array([3, 40, 17, 120, 1]))] == [[3, 1, 2, 0, 4]]


def test_every_sequence_is_in_exactly_one_group_and_no_group_pads_more_than_allowed():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = rng.integers(1, 3000, size=int(rng.integers(1, 40)))
        groups = padded_groups(lengths)
        assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))
        for group in groups:
            padded = len(group) * lengths[group].max()
            assert len(group) == 1 or padded - lengths[group].sum() <= max(MAX_PAD_SHARE * padded, FREE_PAD_TOKENS)


def _alone(model, ids: list[int], types: list[int] | None = None) -> torch.Tensor:  # [len, hidden]
    with torch.inference_mode():
        kwargs = {} if types is None else {"token_type_ids": torch.tensor([types])}
        return model(input_ids=torch.tensor([ids]), **kwargs).last_hidden_state[0]


@pytest.mark.parametrize("lengths", [[5, 700, 3, 9], [7, 2, 30]], ids=["several-forwards", "one-forward"])
def test_each_token_equals_its_sequence_run_alone_in_the_batch_order(lengths):
    # Given a tiny random decoder and sequences in no particular order
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    model = transformers.LlamaModel(config).eval()
    generator = np.random.default_rng(1)
    ids = [generator.integers(1, 64, size=n).tolist() for n in lengths]
    batch = BatchMetadata.from_sequences(range(len(ids)), ids)
    # When the padded runner runs the batch
    out = ModelRunner(model, torch.device("cpu"), pad_token_id=0).forward(batch)
    # Then its flat output is each sequence's own forward, back to back in the batch's order
    assert out.shape == (sum(lengths), 32)
    torch.testing.assert_close(out, torch.cat([_alone(model, x) for x in ids]), atol=1e-5, rtol=0)


def test_token_type_ids_follow_their_sequence_into_its_group():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, max_position_embeddings=1024)
    model = transformers.BertModel(config).eval()
    ids = [[2, 5, 7, 3], list(range(1, 61)) * 10, [2, 9, 3]]
    types = [[0, 0, 1, 1], [0] * 300 + [1] * 300, [0, 1, 1]]
    batch = BatchMetadata.from_sequences(range(3), ids, types)
    assert len(padded_groups(batch.seq_lens)) == 2
    out = ModelRunner(model, torch.device("cpu"), pad_token_id=0).forward(batch)
    torch.testing.assert_close(out, torch.cat([_alone(model, x, t) for x, t in zip(ids, types)]), atol=1e-5, rtol=0)
