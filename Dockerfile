# syntax=docker/dockerfile:1
# The Wander service: `docker build -t wander .` (the trainer image: `--target trainer`).

FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /opt/wander
ENV PATH=/opt/wander/bin:$PATH
COPY pyproject.toml README.md MANIFEST.in ./
COPY tools ./tools
COPY service ./service
COPY client ./client
COPY cli ./cli
COPY migrations ./migrations
COPY trainer ./trainer
# The versions deploy/service.lock pins (`make lock`): two builds install the same.
COPY deploy/service.lock ./deploy/
RUN pip install --no-cache-dir -c deploy/service.lock ".[service]"

FROM build AS trainer-build
# vLLM too, at the version of the server it generates on (compose.yaml): TRL's client
# refuses to start without it and sends the trained weights through vLLM's NCCL engine.
ARG VLLM_VERSION=0.31.0
RUN pip install --no-cache-dir ".[trainer,vllm]" "vllm==${VLLM_VERSION}"

FROM python:3.11-slim AS trainer
RUN useradd --create-home --uid 10001 wander
COPY --from=trainer-build /opt/wander /opt/wander
ENV PATH=/opt/wander/bin:$PATH PYTHONUNBUFFERED=1
USER 10001
WORKDIR /home/wander
ENTRYPOINT ["wander", "train"]

# Last, so that a build without --target gives the service.
FROM python:3.11-slim AS service
RUN useradd --create-home --uid 10001 wander
COPY --from=build /opt/wander /opt/wander
ENV PATH=/opt/wander/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    WANDER_WORKERS=1
USER 10001
WORKDIR /home/wander
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]
ENTRYPOINT ["sh", "-c", "exec wander serve --host 0.0.0.0 --port 8000 --workers \"$WANDER_WORKERS\""]
