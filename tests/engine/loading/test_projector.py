"""sentence-transformers Dense modules as the engine loads them: the activation its config names, and
Tanh where it names none (sentence-transformers' own default when it loads such a config)."""
import json

import torch
from safetensors.torch import save_file

from poolq.engine.loading.projector import load_projector


def _dense(path, **config):
    path.mkdir()
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 4)
    save_file({"linear.weight": linear.weight.detach().contiguous(), "linear.bias": linear.bias.detach()},
              str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"in_features": 8, "out_features": 4, "bias": True, **config}))
    return linear


def test_a_dense_config_without_an_activation_is_tanh_as_sentence_transformers_loads_it(tmp_path):
    linear = _dense(tmp_path / "2_Dense")
    x = torch.randn(3, 8)
    with torch.no_grad():
        projected = load_projector(tmp_path, ("2_Dense",))(x)
        torch.testing.assert_close(projected, torch.tanh(linear(x)))


def test_a_named_identity_is_kept(tmp_path):
    linear = _dense(tmp_path / "2_Dense", activation_function="torch.nn.modules.linear.Identity")
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(load_projector(tmp_path, ("2_Dense",))(x), linear(x))
