"""Tiny random-weight models built from configs (mechanics only; real models prove parity)."""
import pytest
from support.random_models import save_random_model, tiny_bert_config

from poolq.engine.tokenizer import TextTokenizer


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory):
    def make(name, model_class, config):
        path = tmp_path_factory.mktemp(name)
        return path, save_random_model(path, model_class, config)

    return make


@pytest.fixture(scope="session")
def bert_config():
    """Factory for tiny BERT configs that share MiniLM's vocabulary."""
    return tiny_bert_config


BPE_CORPUS = ["query: what is the capital of France", "passage: Paris is the capital of France.",
              "Instruct: Given a web search query\nQuery: hello world"] * 20


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A byte-level BPE tokenizer (GPT-2 / Qwen style: a space belongs to the word after it) ending every
    text with <eos>, trained on a few sentences."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", 0)])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(BPE_CORPUS, trainer)
    path = tmp_path_factory.mktemp("bpe")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>").save_pretrained(path)
    return TextTokenizer(path)
