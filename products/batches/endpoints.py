"""The endpoints a batch may name, each with its format: validated once, when the batch is created."""
from __future__ import annotations

from poolq.products.batches.embeddings_format import EmbeddingsFormat
from poolq.products.batches.endpoint_format import EndpointFormat
from poolq.products.batches.score_formats import RerankFormat, ScoreFormat

ENDPOINT_FORMATS: dict[str, EndpointFormat] = {
    "/v1/embeddings": EmbeddingsFormat(),
    "/v1/score": ScoreFormat(),
    "/v1/rerank": RerankFormat(),
}
