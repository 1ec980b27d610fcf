import numpy as np
import pytest

from poolq.engine.batch import BatchMetadata


def test_flat_layout_offsets_and_positions():
    batch = BatchMetadata.from_sequences([7, 2, 5], [[10, 11, 12], [20], [30, 31]])
    assert batch.input_ids.tolist() == [10, 11, 12, 20, 30, 31]
    assert batch.cu_seqlens.tolist() == [0, 3, 4, 6]
    assert batch.position_ids.tolist() == [0, 1, 2, 0, 0, 1]
    assert batch.first_token_indices.tolist() == [0, 3, 4]
    assert batch.last_token_indices.tolist() == [2, 3, 5]
    assert batch.max_seqlen == 3 and batch.num_tokens == 6 and batch.num_seqs == 3
    assert batch.cu_seqlens.dtype == np.int32


@pytest.mark.parametrize("indices, ids", [([], []), ([0], [[]]), ([0, 1], [[1]])])
def test_rejects_malformed_batches(indices, ids):
    with pytest.raises(ValueError):
        BatchMetadata.from_sequences(indices, ids)


def test_token_type_ids_are_flattened_with_zeros_for_single_texts():
    batch = BatchMetadata.from_sequences([0, 1], [[1, 2, 3], [4, 5]], [[0, 1, 1], None])
    assert batch.token_type_ids.tolist() == [0, 1, 1, 0, 0]
    assert BatchMetadata.from_sequences([0], [[1]]).token_type_ids is None
