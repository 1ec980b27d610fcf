"""Every way ``POST /v1/jobs`` refuses a well-formed request before it writes anything, in one list:
422 naming the field. ``POST /v1/jobs/validate`` must answer each exactly as submit does
(tests/api/server/test_validate_equals_submit.py); the input-URI cases are also the schedules'
(tests/api/server/guards/test_security.py). A new refusal of submit belongs here.

The app they run against: tenant ``TENANT_A`` on a store laid out like a deployment's (bucket
``bucket``, prefix ``jobs``), ``GRANTED`` readable by it, file:// inputs refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
UNKNOWN_ID = "0" * 32

GRANTED = "s3://shared/corpus/"
OWN = f"s3://bucket/jobs/tenants/{TENANT_A}/uploads"
FOREIGN_URIS = [
    f"{OWN}/../../{TENANT_B}/uploads/x.jsonl",  # traversal into another tenant
    f"{OWN}/./x.jsonl",
    f"{OWN}/a//x.jsonl",
    f"{OWN}/..\\..\\{TENANT_B}\\uploads\\x.jsonl",
    "s3://bucket//etc/passwd",
    "s3://other-bucket/x.jsonl",
    f"s3://bucket/jobs/tenants/{TENANT_B}/uploads/x.jsonl",  # another tenant's uploads
    f"s3://bucket/jobs/tenants/{TENANT_B}/uploads/",
    f"s3://bucket/jobs/tenants/{TENANT_A}-evil/uploads/x.jsonl",
    f"s3://bucket/jobs/tenants/{TENANT_A}/jobs/{UNKNOWN_ID}/spec.json",  # own tenant, but not its uploads
    f"s3://bucket/jobs/tenants/{TENANT_A}/uploads",  # the area's name without the separator
    "s3://bucket/jobs/_auth/keys/0000000000000000.json",  # the key store
    f"s3://{TENANT_A}@bucket/jobs/tenants/{TENANT_A}/uploads/x.jsonl",
    "s3://shared/corpus/../private/x.jsonl",
    "s3://shared/corpus-private/x.jsonl",
    "file:///etc/passwd",
    "file://localhost/etc/passwd",
    "http://169.254.169.254/latest/meta-data",
    "https://bucket.s3.amazonaws.com/x.jsonl",
    f"{OWN}/x\n.jsonl",  # control characters (urlparse would silently drop \t \r \n)
    f"{OWN}/x\r\n.jsonl",
    f"{OWN}/x\t.jsonl",
    f"s3://buck\tet/jobs/tenants/{TENANT_A}/uploads/x.jsonl",
    f"{OWN}/x\x00.jsonl",
    f"{OWN}/x\x1b[2J.jsonl",
    f"{OWN}/x\x7f.jsonl",
    f"{OWN}/x.jsonl?versionId=1",
    f"{OWN}/x.jsonl#fragment",
    "s3://bucket",
    "s3:///x.jsonl",
    "",
    f"jobs/tenants/{TENANT_A}/uploads/x.jsonl",
]


ONE_DOC = {"documents": [{"id": "a", "text": "a document"}]}


@dataclass(frozen=True)
class Refusal:
    name: str
    body: dict
    loc: list  # where the 422 points
    settings: dict = field(default_factory=dict)  # Settings overrides of the app


REFUSALS: list[Refusal] = [
    Refusal("no input", {}, ["body", "input"]),
    Refusal("document without id", {"input": {"documents": [{"text": "x"}]}},
            ["body", "input", "InlineInput", "documents", 0, "id"]),
    Refusal("no documents", {"input": {"documents": []}}, ["body", "input", "InlineInput", "documents"]),
    Refusal("unknown task", {"input": ONE_DOC, "task": "rerank"}, ["body", "task"]),
    Refusal("task the model lacks", {"input": ONE_DOC, "task": "classify"}, ["body", "task"]),
    Refusal("unknown model", {"input": ONE_DOC, "model": "no-such-model"}, ["body", "model"]),
    Refusal("a directory as model", {"input": ONE_DOC, "model": "/etc"}, ["body", "model"]),
    Refusal("unknown long-document mode", {"input": ONE_DOC, "long_documents": {"mode": "squash"}},
            ["body", "long_documents", "mode"]),
    Refusal("window wider than the model", {"input": ONE_DOC, "long_documents": {"window_tokens": 4096}},
            ["body", "long_documents", "window_tokens"]),
    Refusal("included field shadows an output column", {"input": ONE_DOC, "output": {"include_fields": ["embedding"]}},
            ["body", "output", "include_fields"]),
    Refusal("inline fields shadow the document's", {"input": {"documents": [{"id": "a", "text": "t", "fields": {"id": 1}}]}},
            ["body", "input", "documents", "0", "fields"]),
    Refusal("a 2,000,001-character document", {"input": {"documents": [{"id": "a", "text": "x" * 2_000_001}]}},
            ["body", "input", "documents", "0", "text"]),
    Refusal("a document over max_document_chars",
            {"input": {"documents": [{"id": "a", "text": "ok"}, {"id": "b", "text": "x" * 11}]}},
            ["body", "input", "documents", "1", "text"], {"max_document_chars": 10}),
    Refusal("more inline documents than allowed", {"input": {"documents": [{"id": str(i), "text": "t"} for i in range(3)]}},
            ["body", "input", "documents"], {"max_inline_documents": 2}),
    Refusal("incremental from an unknown job", {"input": ONE_DOC, "incremental_from": UNKNOWN_ID},
            ["body", "incremental_from"]),
    *(Refusal(f"input uri {uri!r}", {"input": {"uri": uri}}, ["body", "input", "uri"]) for uri in FOREIGN_URIS),
]
