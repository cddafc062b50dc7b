# Multi-stage build: compile on Debian 12 with the -dev packages, run on a
# slim Debian 12 with only the runtime libraries, as a non-root user.
FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        g++ make cmake pkg-config libboost-dev libspdlog-dev libcli11-dev libmurmurhash-dev \
        libxxhash-dev nlohmann-json3-dev libgtest-dev libssl-dev libjemalloc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBLOOMERY_BUILD_TESTS=OFF \
    && cmake --build build -j"$(nproc)" --target bloomery

FROM debian:12-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libspdlog1.10 libfmt9 libmurmurhash2 libxxhash0 libssl3 libjemalloc2 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin bloomery \
    && mkdir -p /data && chown bloomery:bloomery /data
COPY --from=build /src/build/bloomery /usr/local/bin/bloomery
USER bloomery
VOLUME /data
# 6379: the Redis protocol; 9188: /metrics (Prometheus), /healthz, /readyz.
EXPOSE 6379 9188
# Listening on every interface with protected mode on: until a password is
# given (BLOOMERY_REQUIREPASS, BLOOMERY_REQUIREPASS_FILE or an ACL file) only
# clients inside the container are served; others get -DENIED.
# --maxmemory as a share of the container's memory limit (cgroup), so that
# BF.RESERVE past it answers -OOM instead of the kernel killing the server;
# the rest is headroom for the allocator, stacks and snapshot buffers.
# The monitoring listener is on (it serves no data; README "Monitoring").
ENV BLOOMERY_BIND=0.0.0.0 BLOOMERY_DIR=/data BLOOMERY_MAXMEMORY=75% BLOOMERY_METRICS_PORT=9188
# bloomery itself PINGs the server (no redis-cli in the image), authenticating
# with the password the server reads from the same environment
# (BLOOMERY_REQUIREPASS or BLOOMERY_REQUIREPASS_FILE); exit 0 on PONG.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD /usr/local/bin/bloomery --health-check "127.0.0.1:${BLOOMERY_PORT:-6379}"
# SIGTERM (docker stop) writes a final snapshot and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/bloomery"]
