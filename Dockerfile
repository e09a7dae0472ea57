# perfgate images, two targets:
#
#   deploy/image/prepare && docker build --target server -t perfgate-server .   # the GitHub App server
#   docker build --target agent -t perfgate-agent .                              # the GPU runner agent
#
# The server image needs no registry: it starts FROM scratch and holds a
# static perfgate (CGO_ENABLED=0) and the CA certificates of Debian's
# ca-certificates package, both prepared on this machine by
# deploy/image/prepare (run it first: without it the COPY below fails with
# "deploy/image/perfgate: no such file"). It runs as the numeric user
# 65532, without a shell. The server stage comes first and depends on no
# other stage, so even Docker's legacy builder (which builds every stage
# before the target) builds nothing else for --target server.
#
# The agent is built with cgo and the nvml tag for NVML telemetry, on
# Debian slim with the docker CLI (it starts the inference engine as a
# container); libnvidia-ml itself is mounted by the NVIDIA container toolkit
# at run time (docker run --gpus all …). Its base images come from a
# registry, pinned by digest as perfgate demands of engine images. The
# digests were taken from public Dockerfiles that pin these tags (this
# workplace cannot reach a registry to resolve them); before a release,
# refresh them with `docker buildx imagetools inspect IMAGE:TAG`.
#
# No "# syntax=" line: BuildKit would fetch that frontend from a registry.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d
ARG AGENT_BASE=debian:bookworm-slim@sha256:96e378d7e6531ac9a15ad505478fcc2e69f371b10f5cdf87857c4b8188404716
ARG DOCKER_CLI_IMAGE=docker:27-cli@sha256:851f91d241214e7c6db86513b270d58776379aacc5eb9c4a87e5b47115e3065c

FROM scratch AS server
COPY deploy/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY deploy/image/perfgate /usr/local/bin/perfgate
# The data directory, owned by the server's user: a named volume mounted
# here starts with that owner.
COPY --chown=65532:65532 deploy/image/data /var/lib/perfgate
USER 65532:65532
WORKDIR /var/lib/perfgate
VOLUME /var/lib/perfgate
# SQLite and the setup's credentials live in the data directory; set
# PERFGATE_DATABASE_URL=postgres://… for several replicas.
ENV PERFGATE_DATA_DIR=/var/lib/perfgate PERFGATE_ADDR=:8080 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["perfgate", "healthcheck"]
ENTRYPOINT ["perfgate"]
CMD ["serve"]

FROM ${GO_IMAGE} AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev

FROM source AS build-agent
RUN CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
    go build -tags nvml -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/perfgate ./cmd/perfgate

FROM ${DOCKER_CLI_IMAGE} AS docker-cli

FROM ${AGENT_BASE} AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 perfgate \
 && useradd --system --uid 10001 --gid perfgate --home-dir /var/lib/perfgate-agent --create-home perfgate
COPY --from=docker-cli /usr/local/bin/docker /usr/local/bin/docker
COPY --from=build-agent /out/perfgate /usr/local/bin/perfgate
# The agent talks to the host's Docker daemon through its socket: run with
#   -v /var/run/docker.sock:/var/run/docker.sock --group-add "$(stat -c %g /var/run/docker.sock)"
USER 10001:10001
WORKDIR /var/lib/perfgate-agent
VOLUME /var/lib/perfgate-agent
# Healthy while the agent can reach the Docker daemon it starts engines on.
HEALTHCHECK --interval=60s --timeout=10s --start-period=10s --retries=3 \
  CMD ["docker", "version", "--format", "{{.Server.Version}}"]
ENTRYPOINT ["perfgate", "agent"]
CMD ["--state-dir", "/var/lib/perfgate-agent"]
