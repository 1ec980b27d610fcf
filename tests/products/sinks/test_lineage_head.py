"""A sink table's identity for its lineage heads: where the table is, never the credentials to reach it."""
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.lineage_head import table_identity


def test_the_identity_is_the_tables_place_without_its_credentials():
    base = SinkConfig(url="postgresql://poolq:secret-1@db.internal:5432/search", table="docs")
    rotated = SinkConfig(url="postgresql://poolq:secret-2@db.internal:5432/search", table="docs")
    assert table_identity(base) == table_identity(rotated)  # a rotated password is the same table
    assert "secret" not in table_identity(base)
    others = [SinkConfig(url="postgresql://poolq:secret-1@db.internal:5432/search", table="other"),
              SinkConfig(url="postgresql://poolq:secret-1@db2.internal:5432/search", table="docs"),
              SinkConfig(url="postgresql://poolq:secret-1@db.internal:5432/archive", table="docs"),
              SinkConfig(url="lancedb:///data/search", table="docs")]
    assert len({table_identity(config) for config in [base, *others]}) == 5
