"""An embed job that names no dimensions writes the model's size: cut to its ``truncate_dim`` (what the
engine computes, tests/engine/test_truncate_dim.py), also in the schema of a job that wrote no row."""
import json

from poolq.engine import read_model_spec
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.tasks import job_task
from poolq.jobs.tasks.embed_task import default_output_dimensions


def _model(path, **st_config):
    (path / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "hidden_size": 32,
                                                  "max_position_embeddings": 64}))
    (path / "config_sentence_transformers.json").write_text(json.dumps(st_config))
    return read_model_spec(path)


def _dimensions(schema) -> int:
    return schema.field("embedding").type.list_size


def test_a_job_naming_no_dimensions_has_the_models_truncate_dim(tmp_path):
    spec = _model(tmp_path, truncate_dim=12)
    job = job_task(JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x"}]}}))
    assert default_output_dimensions(spec) == 12
    assert _dimensions(job.schema(spec, None)) == 12
    assert _dimensions(job.schema(spec, 20)) == 20  # a job's dimensions, as its shards wrote them
    assert default_output_dimensions(_model(tmp_path, truncate_dim=64)) == 32  # larger than the vectors: no cut
    assert default_output_dimensions(_model(tmp_path)) == 32
