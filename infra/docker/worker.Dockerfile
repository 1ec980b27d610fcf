# GPU worker: poolq's engine on CUDA, consuming the `control` and `gpu` queues.
# Build from the repository root:  docker build -f infra/docker/worker.Dockerfile -t poolq-worker .
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY engine engine
COPY storage storage
COPY jobs jobs
COPY api api
# torch comes from the base image (CUDA build); the range in pyproject.toml accepts it.
RUN pip install --no-cache-dir .

# Models load from installed wheels or mounted directories, never from a hub.
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    POOLQ_DEVICE=cuda \
    POOLQ_DTYPE=float16
# One worker per GPU of the container (here: the one it was given).
CMD ["poolq", "worker", "--gpus", "0"]
