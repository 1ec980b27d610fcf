"""The compile probe times the engine's own computation: its layer split (the engine's attention,
then the dense part it hands to torch.compile) equals the packed encoder's forward. Checked
without compiling (torch.compile as the identity): what inductor does is the probe's to measure."""
import torch
import transformers
from compile_probe import _compiled_forward

from poolq.engine.models import PackedBertEncoder


def test_the_split_forward_equals_the_engines_packed_forward(monkeypatch):
    config = transformers.BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).eval()
    encoder = PackedBertEncoder(model)
    monkeypatch.setattr(torch, "compile", lambda module, **options: module)
    split = _compiled_forward(encoder, torch)
    lengths = [5, 1, 40, 9]
    ids = torch.randint(3, 300, (sum(lengths),))
    positions = torch.cat([torch.arange(n) for n in lengths])
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    with torch.inference_mode():
        expected = encoder(ids, positions, cu_seqlens, max(lengths))  # [num_tokens, hidden]
        got = split(ids, positions, cu_seqlens, max(lengths))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
