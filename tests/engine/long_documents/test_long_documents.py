"""Long documents: chunked processing, naive chunks, late chunking, chunk boundaries."""
import numpy as np
import pytest

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingParams, PoolingRequest, PoolingTask
from poolq.engine.batch import BatchMetadata
from poolq.engine.long_documents.chunking import balanced_pieces, token_chunks
from poolq.engine.long_documents.policy_check import ONE_RESULT_MODES, longer_document_modes, mode_hint, narrow_mode_hint
from poolq.engine.long_documents.window_planner import PolicyError
from poolq.engine.request import ChunkBoundary


def _long_text(sample_documents, n_docs=3):
    return "\n\n".join(d["text"] for d in sample_documents[1:1 + n_docs])


def _runs_of(count: int, size: int) -> list[tuple[int, int]]:
    """Runs of ``size`` over ``count`` tokens; a last run under a quarter of ``size`` shares the
    tokens of the run before it evenly (the first of the two taking the odd one)."""
    runs = [(start, min(start + size, count)) for start in range(0, count, size)]
    if len(runs) > 1 and 4 * (runs[-1][1] - runs[-1][0]) < size:
        first = runs[-2][0]
        middle = first + (count - first + 1) // 2
        runs[-2:] = [(first, middle), (middle, count)]
    return runs


def _window_vectors(engine, windows, normalize=None):
    """The engine's own vector for each token window, computed window by window."""
    vectors = []
    for ids in windows:
        batch = BatchMetadata.from_sequences([0], [ids])
        hidden = engine.runner.forward(batch)
        (vector,) = engine.dispatcher.forward(hidden, batch, [PoolingRequest(0, "", params=PoolingParams(normalize=normalize))])
        vectors.append(vector)
    return np.stack(vectors)


def test_chunked_equals_the_token_weighted_formula_and_is_unit_norm(minilm_engine, sample_documents):
    # Given a document several windows long (MEAN pooling: windows cut from the full sequence)
    text = _long_text(sample_documents)
    content = minilm_engine.tokenizer.count_and_tokenize([text])[0]
    prefix, suffix = minilm_engine.tokenizer.special_ids
    full = [*prefix, *content, *suffix]
    windows = [full[i:i + 256] for i in range(0, len(full), 256)]
    assert len(windows) >= 4
    # When it is embedded in chunked mode
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], LongDocumentPolicy(mode=LongDocumentMode.CHUNKED))
    # Then it equals sum(n_j e_j) / sum(n_j), normalized again
    vectors = _window_vectors(minilm_engine, windows)
    weights = np.array([len(w) for w in windows], dtype=np.float64)[:, None]
    expected = (vectors * weights).sum(0) / weights.sum()
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(result.data, expected, atol=1e-6)
    assert abs(np.linalg.norm(result.data) - 1) < 1e-6
    assert (result.num_tokens, result.truncated, result.processed_tokens) == (len(full), False, len(full))


def test_chunked_can_readd_special_tokens_to_every_window(minilm_engine, sample_documents):
    text = _long_text(sample_documents, 2)
    content = minilm_engine.tokenizer.count_and_tokenize([text])[0]
    prefix, suffix = minilm_engine.tokenizer.special_ids
    step = 256 - len(prefix) - len(suffix)
    windows = [[*prefix, *content[i:i + step], *suffix] for i in range(0, len(content), step)]
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_specials=True)
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], policy)
    vectors = _window_vectors(minilm_engine, windows)
    weights = np.array([len(w) for w in windows], dtype=np.float64)[:, None]
    expected = (vectors * weights).sum(0) / weights.sum()
    np.testing.assert_allclose(result.data, expected / np.linalg.norm(expected), atol=1e-6)


def test_max_embed_len_rejects_longer_documents_per_record(minilm_engine, sample_documents):
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, max_embed_len=1000)
    short, long = "a short text", _long_text(sample_documents)
    ok, error = minilm_engine.run([PoolingRequest("s", short), PoolingRequest("l", long)], policy)
    assert ok.data.shape == (384,)
    assert error.code == "document_too_long" and "this job accepts at most max_embed_len=1000" in error.message


def test_max_embed_len_above_the_window_outside_chunked_is_refused(minilm_engine):
    with pytest.raises(PolicyError, match="max_embed_len=300 exceeds the window"):
        list(minilm_engine.run([PoolingRequest("s", "x")], LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, max_embed_len=300)))


def test_naive_chunks_embed_each_chunk_alone_with_spans(minilm_engine, sample_documents):
    text = sample_documents[1]["text"]
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_tokens=100)
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], policy)
    content = minilm_engine.tokenizer.count_and_tokenize([text])[0]
    prefix, suffix = minilm_engine.tokenizer.special_ids
    expected_windows = [[*prefix, *content[start:end], *suffix] for start, end in _runs_of(len(content), 100)]
    np.testing.assert_allclose(result.data, _window_vectors(minilm_engine, expected_windows), atol=1e-6)
    assert len(result.chunks) == len(expected_windows) == result.data.shape[0]
    # Spans: token spans are contiguous in full-sequence coordinates; char spans point at the text
    assert [c.chunk_index for c in result.chunks] == list(range(len(result.chunks)))
    assert all(a.token_end == b.token_start for a, b in zip(result.chunks, result.chunks[1:]))
    first = result.chunks[0]
    assert first.token_start == len(prefix) and first.char_start == 0
    assert text[first.char_start:first.char_end].split()[:3] == text.split()[:3]


def test_sentence_chunks_follow_sentence_ends(minilm_engine):
    text = "The first sentence is here. A second one follows! Is this the third? Yes, the fourth."
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_by=ChunkBoundary.SENTENCES, chunk_sentences=2)
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], policy)
    pieces = [text[c.char_start:c.char_end] for c in result.chunks]
    assert pieces == ["The first sentence is here. A second one follows!", "Is this the third? Yes, the fourth."]


def test_a_sentence_group_longer_than_the_window_is_split_not_lost(minilm_engine):
    # Given a 32-token window and a document whose middle sentence group is a long code listing
    listing = "Run " + " ".join(f"step_{i}(x)" for i in range(40)) + " now."
    text = f"A short opening. {listing} A short ending."
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_by=ChunkBoundary.SENTENCES,
                                chunk_sentences=1, window_tokens=32)
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], policy)
    # Then the document is kept: the long sentence is cut at the window into pieces flagged split,
    # each embedded exactly as that window alone; the short sentences stay whole and unflagged
    assert not hasattr(result, "code"), result
    prefix, suffix = minilm_engine.tokenizer.special_ids
    room = 32 - len(prefix) - len(suffix)
    flags = [chunk.split for chunk in result.chunks]
    assert flags[0] is False and flags[-1] is False and all(flags[1:-1]) and len(flags) >= 4
    assert all(c.token_end - c.token_start <= room for c in result.chunks)
    assert all(a.token_end == b.token_start for a, b in zip(result.chunks, result.chunks[1:]))
    content = minilm_engine.tokenizer.count_and_tokenize([text])[0]
    windows = [[*prefix, *content[c.token_start - len(prefix):c.token_end - len(prefix)], *suffix] for c in result.chunks]
    np.testing.assert_allclose(result.data, _window_vectors(minilm_engine, windows), atol=1e-6)
    assert text[result.chunks[1].char_start:result.chunks[-2].char_end] == listing
    # And with split_long_chunks off, the same document is one chunk_too_long error
    strict = LongDocumentPolicy(**{**policy.__dict__, "split_long_chunks": False})
    (error,) = minilm_engine.run([PoolingRequest("doc", text)], strict)
    assert error.code == "chunk_too_long" and "split_long_chunks" in error.message


def test_caller_spans_and_bad_spans(minilm_engine):
    text = "alpha beta gamma delta epsilon"
    policy = LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, chunk_by=ChunkBoundary.SPANS)
    good, overlapping, missing = minilm_engine.run([
        PoolingRequest("g", text, chunk_spans=((0, 10), (11, 30))),
        PoolingRequest("o", text, chunk_spans=((0, 12), (11, 30))),
        PoolingRequest("m", text),
    ], policy)
    assert [text[c.char_start:c.char_end] for c in good.chunks] == ["alpha beta", "gamma delta epsilon"]
    assert good.chunks[0].token_start == 0 and good.chunks[-1].token_end == good.num_tokens
    assert overlapping.code == "invalid_chunks" and "overlaps" in overlapping.message
    assert missing.code == "invalid_chunks" and "needs chunk spans" in missing.message


def test_late_chunks_serve_embed_only(minilm_engine):
    (result,) = minilm_engine.run([PoolingRequest("t", "text", PoolingTask.TOKEN_EMBED)],
                                  LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS))
    assert result.code == "unsupported_mode"


@pytest.mark.parametrize("window, overlap, chunk_tokens", [(256, None, 64), (128, 32, 100), (128, 0, 50)])
def test_late_chunks_equal_an_independent_reference(
    minilm_engine, long_documents, sample_documents, window, overlap, chunk_tokens
):
    # Given a real article of ~3.5k tokens (long late chunking at a 128 window) or a shorter speech
    from late_chunking_reference import fixed_token_spans, late_chunk_embeddings

    text = long_documents[0]["text"] if window == 128 else sample_documents[3]["text"][:900]
    policy = LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, window_tokens=window,
                                overlap_tokens=overlap, chunk_tokens=chunk_tokens)
    # When poolq late-chunks it
    (result,) = minilm_engine.run([PoolingRequest("doc", text)], policy)
    # Then every chunk vector equals the reference's (one transformers pass + span means)
    spans = [(c.token_start, c.token_end) for c in result.chunks]
    assert spans == fixed_token_spans(result.num_tokens, chunk_tokens)
    reference = late_chunk_embeddings(minilm_engine.spec.path, text, spans, window_tokens=window,
                                      overlap=overlap if overlap is not None else window // 4)
    cosines = (result.data * reference).sum(1) / np.linalg.norm(result.data, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosines.min() >= 0.9999, cosines.min()
    assert result.data.shape == (len(spans), 384)


def test_late_chunks_refuse_non_mean_models_unless_allowed(model_factory, bert_config):
    from transformers import BertModel

    from poolq.engine import PoolingEngine

    path, _ = model_factory("cls-encoder", BertModel, bert_config())
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")  # no pooling config: CLS
    with pytest.raises(PolicyError, match="pools with CLS"):
        list(engine.run([PoolingRequest("d", "text")], LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS)))
    (ok,) = engine.run([PoolingRequest("d", "some text")],
                       LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, allow_any_pooling=True))
    assert ok.data.shape[0] == 1


def test_very_long_texts_tokenize_in_pieces_exactly_as_whole(minilm_engine, long_documents, monkeypatch):
    import poolq.engine.tokenizer as tokenizer_module

    text = " \n".join(d["text"] for d in long_documents)
    whole_ids = minilm_engine.tokenizer._tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    monkeypatch.setattr(tokenizer_module, "PIECE_CHARS", 5_000)  # force ~22 pieces
    (ids,), (offsets,) = minilm_engine.tokenizer.tokenize_with_offsets([text])
    assert ids == whole_ids["input_ids"] and offsets == [tuple(o) for o in whole_ids["offset_mapping"]]
    assert minilm_engine.tokenizer.count_and_tokenize([text])[0] == ids


def test_a_document_making_more_chunks_than_the_cap_is_one_error_not_thousands_of_rows(minilm_engine):
    from dataclasses import replace

    from poolq.engine import PoolingEngine, RequestError

    # Given an engine capped at 5 chunk rows per document, and chunks of 1 token
    capped = PoolingEngine(minilm_engine.loaded, replace(minilm_engine.config, max_chunks_per_document=5))
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_tokens=1)
    # When a 4-token text and a 40-token text are embedded
    short, long = "one two three four", " ".join(["word"] * 40)
    results = list(capped.run([PoolingRequest("short", short), PoolingRequest("long", long)], policy))
    # Then the short one has its chunk rows and the long one is a too_many_chunks error naming the cap
    assert not isinstance(results[0], RequestError) and len(results[0].chunks) == 4
    assert isinstance(results[1], RequestError) and results[1].code == "too_many_chunks"
    assert "40 chunks; at most 5" in results[1].message


@pytest.mark.parametrize("mode", [LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE, LongDocumentMode.CHUNKED,
                                  LongDocumentMode.LATE_CHUNKS])
def test_a_text_that_tokenizes_to_nothing_is_an_error_in_every_mode(minilm_engine, mode):
    from poolq.engine import RequestError

    [result] = minilm_engine.run([PoolingRequest("marks", "\u0301\u0301\u0301")], LongDocumentPolicy(mode=mode))
    assert isinstance(result, RequestError) and result.code == "empty_after_tokenization"


@pytest.mark.parametrize("count, size", [(514, 256), (513, 256), (575, 256), (576, 256), (100, 256), (256, 256),
                                         (257, 256), (7, 3), (9, 3), (1, 1), (0, 8)])
def test_token_chunks_leave_no_sliver(count, size):
    chunks = token_chunks(count, size)
    assert chunks == _runs_of(count, size)
    assert all(end - start <= size for start, end in chunks)
    assert len(chunks) <= 1 or all(4 * (end - start) >= size for start, end in chunks), chunks


@pytest.mark.parametrize("start, end, most, lengths", [
    (0, 254, 253, [127, 127]), (10, 517, 253, [169, 169, 169]), (0, 507, 253, [169, 169, 169]), (0, 5, 5, [5]),
    (3, 10, 3, [3, 2, 2]),
])
def test_a_split_chunks_pieces_are_balanced(start, end, most, lengths):
    pieces = balanced_pieces(start, end, most)
    assert [b - a for a, b in pieces] == lengths and pieces[0][0] == start and pieces[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))


def test_naive_chunks_by_default_fill_the_window_and_leave_no_sliver_on_real_speeches(minilm_engine, sample_documents):
    # Given the demo corpus (State of the Union speeches, most far longer than MiniLM's 256-token window)
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS)  # chunk_tokens unset
    prefix, suffix = minilm_engine.tokenizer.special_ids
    room = minilm_engine.spec.window_tokens - len(prefix) - len(suffix)
    requests = [PoolingRequest(d["id"], d["text"]) for d in sample_documents]
    # When each is cut into naive chunks with the defaults
    results = list(minilm_engine.run(requests, policy))
    lengths = [[c.token_end - c.token_start for c in result.chunks] for result in results]
    # Then a chunk is what a window holds besides [CLS] and [SEP]: none is split, none overflows
    assert all(not c.split for result in results for c in result.chunks)
    assert max(n for row in lengths for n in row) == room, room
    # And no row is a sliver: every row is at least a quarter of a window, unless it is a whole document
    rows = [n for row in lengths for n in row]
    assert sum(len(row) > 1 for row in lengths) >= 20 and len(rows) > 100, lengths
    assert all(4 * n >= room for row in lengths if len(row) > 1 for n in row), lengths
    assert min(rows) > 2


@pytest.mark.parametrize("tasks, pair, hint", [
    ((PoolingTask.EMBED,), False, "(set long_documents.mode to 'truncate', 'chunked', 'naive_chunks' or 'late_chunks')"),
    ((PoolingTask.SPARSE_EMBED,), False, "(set long_documents.mode to 'truncate', 'chunked' or 'naive_chunks')"),
    ((PoolingTask.TOKEN_EMBED,), False, "(set long_documents.mode to 'truncate' or 'chunked')"),
    ((PoolingTask.EMBED, PoolingTask.SPARSE_EMBED), False, "(set long_documents.mode to 'truncate')"),
    ((PoolingTask.CLASSIFY,), True, "(set long_documents.mode to 'truncate')"),
])
def test_a_too_long_hint_names_the_modes_the_task_can_follow(tasks, pair, hint):
    assert mode_hint(longer_document_modes(tasks, pair)) == " " + hint


def test_a_route_narrows_the_hint_to_what_it_takes():
    message = "document has 900 tokens; the model's window is 256" + mode_hint(longer_document_modes((PoolingTask.EMBED,)))
    assert narrow_mode_hint(message, ONE_RESULT_MODES, "poolq.long_documents.mode") == (
        "document has 900 tokens; the model's window is 256 (set poolq.long_documents.mode to 'truncate' or 'chunked')")
    assert narrow_mode_hint("no hint here", ONE_RESULT_MODES, "x") == "no hint here"


def test_document_too_long_suggests_what_the_task_takes(minilm_engine, sample_documents):
    (error,) = minilm_engine.run([PoolingRequest("long", _long_text(sample_documents))], LongDocumentPolicy())
    assert error.code == "document_too_long" and error.message.endswith(
        "(set long_documents.mode to 'truncate', 'chunked', 'naive_chunks' or 'late_chunks')"), error.message
