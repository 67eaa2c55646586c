# syntax=docker/dockerfile:1
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="training-job-exporter" \
      org.opencontainers.image.description="Prometheus exporter for training jobs on Baidu AIHC and Alaya NeW Cloud" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin exporter
# The default configuration: config/exporter.yaml, every key with its default and two example
# targets. Mount your own over it; credentials come from TJE_* variables or *_file mounts.
COPY config/exporter.yaml /etc/training-job-exporter/exporter.yaml
USER 10001
EXPOSE 10050
# The probe uses the default listen address; override it with the image's if you move the port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:10050/-/healthy', timeout=4)"]
ENTRYPOINT ["training-job-exporter"]
CMD ["--config", "/etc/training-job-exporter/exporter.yaml"]
