# The Horus operator image for users with Docker: docker build -t horus-operator:0.1.0 .
# `make image` (hack/build-image.sh, docs/image.md) builds the same layout without a container engine:
# Debian bookworm's python3 (CPython 3.11), the wheel and its runtime dependencies in the venv /opt/horus,
# user 65532, no pip and no compiler inside. Keep the two in step.
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv
COPY pyproject.toml README.md /src/
COPY horus_operator /src/horus_operator
# pip from a throwaway venv installs into /opt/horus, which gets none.
RUN python3 -m venv /build \
 && /build/bin/pip wheel --no-cache-dir --wheel-dir /wheels /src \
 && python3 -m venv --without-pip /opt/horus \
 && /build/bin/pip --python /opt/horus/bin/python install --no-cache-dir --no-index --find-links /wheels horus-operator

FROM debian:bookworm-slim
# libstdc++6: numpy's and onnx's manylinux wheels link against it.
RUN apt-get update && apt-get install -y --no-install-recommends python3 libstdc++6 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* \
 && echo 'nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group
COPY --from=build /opt/horus /opt/horus
# Non-root (matches runAsUser in the manifests); the root filesystem is mounted read-only there.
USER 65532:65532
WORKDIR /tmp
ENV PATH=/opt/horus/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
EXPOSE 8080
ENTRYPOINT ["horus"]
CMD ["run"]
