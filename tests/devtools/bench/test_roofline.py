"""The roofline: FLOPs from the model's shapes (checked by hand for MiniLM), the GEMM peak, MFU."""
import pytest
import transformers

from poolq.devtools.bench.roofline import GEMM_SHAPE, encoder_flops, gemm_flops, measure_gemm_peak, mfu
from poolq.engine import ModelRegistry


@pytest.fixture(scope="module")
def minilm_config():
    path = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    return transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)


def test_minilm_flops_are_the_hand_computed_ones(minilm_config):
    assert (minilm_config.hidden_size, minilm_config.intermediate_size, minilm_config.num_hidden_layers) == (384, 1536, 6)
    # By hand, per layer: linear 2 x 640 tokens x (4 x 384^2 + 2 x 384 x 1536) = 2,264,924,160;
    # attention (QK^T and AV) 2 x 2 x 384 x (128^2 + 512^2) = 427,819,008; x 6 layers.
    assert encoder_flops(minilm_config, [128, 512]) == 6 * (2_264_924_160 + 427_819_008) == 16_156_459_008
    # The linear layers alone: ~21 MFLOP a token, as the roofline says
    assert encoder_flops(minilm_config, [1]) - 6 * 4 * 384 == 21_233_664


def test_attention_grows_with_the_square_of_each_sequence_not_of_the_batch(minilm_config):
    packed = encoder_flops(minilm_config, [256, 256])
    assert packed < encoder_flops(minilm_config, [512])
    assert encoder_flops(minilm_config, [512]) - packed == 6 * 4 * 384 * (512 ** 2 - 2 * 256 ** 2)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_the_gemm_peak_is_measured_in_the_dtype(dtype):
    shape = (256, 384, 1536)
    assert measure_gemm_peak(dtype, shape=shape, repeats=2) > 0
    assert gemm_flops(GEMM_SHAPE) == 2 * 4096 * 384 * 1536


def test_mfu_is_flops_over_time_over_the_peak():
    assert mfu(2e9, 1.0, 4.0) == pytest.approx(0.5)
    assert mfu(2e9, 1.0, None) is None
