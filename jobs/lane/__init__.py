"""The interactive lane: ``POST /v1/embeddings`` requests carried from the API to compute workers.

The API submits a request and waits for its reply until a deadline (``embedding_lane.py``); a
thread in each compute worker process takes requests and embeds them on the engine the shard
tasks use, between two steps of a running shard (``lane_server.py``, ``lane_embedder.py``).
Two carriers: Redis (``redis_lane.py``), and one in process (``memory_lane.py``).
"""
