"""The GGUF conversion's parse-once scope (``gguf_cache._gguf_parsed_once``); the conversion itself
is checked end to end on SmolLM2 in ``test_packaged_models.py``."""
import gguf
import numpy as np
import pytest

from poolq.engine.loading.gguf_cache import _gguf_parsed_once


@pytest.fixture
def tiny_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_inside_the_scope_a_file_is_parsed_once_and_a_name_map_built_once(tiny_gguf):
    with _gguf_parsed_once():
        first, second = gguf.GGUFReader(tiny_gguf), gguf.GGUFReader(str(tiny_gguf))
        assert first is second
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert first.get_tensor(0).name == "token_embd.weight"
        assert np.array_equal(np.asarray(first.get_tensor(0).data).reshape(3, 4), np.arange(12).reshape(3, 4))


def test_outside_the_scope_gguf_is_itself_again_even_after_an_error(tiny_gguf):
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(RuntimeError), _gguf_parsed_once():
        raise RuntimeError("the conversion failed")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_class, name_map)
    assert gguf.GGUFReader(tiny_gguf) is not gguf.GGUFReader(tiny_gguf)
