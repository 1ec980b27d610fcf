"""Model fingerprints: equal for equal files wherever they live, different when a file changes."""
import shutil

from poolq.engine.loading.model_fingerprint import model_fingerprint
from poolq.engine.loading.registry import ModelRegistry


def _model_dir(root, weights: bytes = b"w" * (3 << 20)):
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"hidden_size": 8}')
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (root / "model.safetensors").write_bytes(weights)
    return root


def test_the_same_files_in_another_place_have_the_same_fingerprint(tmp_path):
    first = _model_dir(tmp_path / "a")
    second = tmp_path / "b"
    shutil.copytree(first, second)
    assert model_fingerprint(first) == model_fingerprint(second)
    assert model_fingerprint(first).startswith("sha256:") and len(model_fingerprint(first)) == 7 + 32


def test_a_changed_renamed_or_added_file_changes_the_fingerprint(tmp_path):
    base = model_fingerprint(_model_dir(tmp_path / "base"))
    edited = _model_dir(tmp_path / "edited")
    (edited / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    retrained = _model_dir(tmp_path / "retrained", weights=b"w" * ((3 << 20) - 1) + b"x")  # last byte
    resized = _model_dir(tmp_path / "resized", weights=b"w" * ((3 << 20) + 1))
    added = _model_dir(tmp_path / "added")
    (added / "2_Dense").mkdir()
    (added / "2_Dense" / "config.json").write_text("{}")
    moved = _model_dir(tmp_path / "moved")
    (moved / "model.safetensors").rename(moved / "pytorch_model.safetensors")
    fingerprints = [model_fingerprint(path) for path in (edited, retrained, resized, added, moved)]
    assert len({base, *fingerprints}) == 6


def test_the_registry_fingerprints_a_gguf_model_by_its_file_without_converting(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(100))
    monkeypatch.setattr("poolq.engine.loading.gguf_cache._convert", lambda *_: (_ for _ in ()).throw(AssertionError("converted")))
    registry = ModelRegistry(gguf_models={"m": gguf}, cache_root=tmp_path / "cache")
    before = registry.fingerprint("m")
    assert before == model_fingerprint(gguf)
    gguf.write_bytes(b"GGUF" + bytes(99) + b"\x01")
    assert registry.fingerprint("m") != before and not (tmp_path / "cache").exists()
