# crawlsched API: slim, non-root, with a health check on /healthz (which needs no token).
# It listens on every interface of the container, so it refuses to start without tokens:
# set CRAWLSCHED_AUTH_TOKENS (role:token,...) or CRAWLSCHED_AUTH_TOKENS_FILE.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scheduler_core ./scheduler_core
COPY service ./service
RUN pip install . && useradd --create-home --uid 10001 crawlsched
USER crawlsched

EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, httpx; sys.exit(httpx.get('http://127.0.0.1:8000/healthz', timeout=2).status_code != 200)"]
CMD ["crawlsched", "serve", "--host", "0.0.0.0", "--port", "8000"]
