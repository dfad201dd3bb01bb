# The Horus operator image (manifests/operator.yaml runs `horus run`). Build: docker build -t horus-operator:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY horus_operator ./horus_operator
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels horus-operator && rm -rf /wheels
# Non-root (matches runAsUser in the Deployment); the root filesystem is mounted read-only there.
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
EXPOSE 8080
ENTRYPOINT ["horus"]
CMD ["run"]
