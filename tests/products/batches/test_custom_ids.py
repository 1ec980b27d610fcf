"""The batch input's seen custom ids: exact, case-sensitive, any JSON string, on disk."""
from poolq.products.batches.custom_ids import SeenCustomIds


def test_an_id_is_new_once_and_ids_differing_in_any_code_point_are_distinct():
    ids = ["req-1", "REQ-1", "req-1 ", "é", "e\u0301", "nul\x00inside", "lone\ud800surrogate", "x" * 512, "😀"]
    with SeenCustomIds() as seen:
        assert [seen.add(custom_id) for custom_id in ids] == [True] * len(ids)
        assert [seen.add(custom_id) for custom_id in reversed(ids)] == [False] * len(ids)


def test_many_ids_each_count_once():
    with SeenCustomIds() as seen:
        assert sum(seen.add(f"request-{i}") for i in range(20_000)) == 20_000
        assert sum(seen.add(f"request-{i}") for i in range(0, 20_000, 7)) == 0
        assert seen.add("request-20000")
