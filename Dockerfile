# perfgate images, two targets, neither needing a registry:
#
#   deploy/image/prepare && docker build --target server -t perfgate-server .        # the GitHub App server
#   deploy/image/prepare-agent && docker build --target agent -t perfgate-agent .    # the GPU runner agent
#
# The server image starts FROM scratch and holds a static perfgate
# (CGO_ENABLED=0) and the CA certificates of Debian's ca-certificates
# package, both prepared on this machine by deploy/image/prepare (run it
# first: without it the COPY below fails with "deploy/image/perfgate: no
# such file"). It runs as the numeric user 65532, without a shell. The
# server stage comes first and depends on no other stage, so even Docker's
# legacy builder (which builds every stage before the target) builds
# nothing else for --target server.
#
# The agent image starts FROM scratch too, with the root file system
# deploy/image/prepare-agent made on this machine: perfgate built with cgo
# and the nvml tag for NVML telemetry, the static perfgate for the sandbox
# relay, this host's docker CLI (it starts the inference engine as a
# container), their shared libraries and the loader, ldconfig and the CA
# bundle. libnvidia-ml itself is mounted by the NVIDIA container toolkit at
# run time (docker run --gpus all …).
#
# No "# syntax=" line: BuildKit would fetch that frontend from a registry.

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

FROM scratch AS agent
COPY deploy/image/agent/ /
# The loader's cache of the copied libraries (ldconfig is static).
RUN ["/sbin/ldconfig"]
COPY --chown=10001:10001 deploy/image/agent-state /var/lib/perfgate-agent
# The agent talks to the host's Docker daemon through its socket: run with
#   -v /var/run/docker.sock:/var/run/docker.sock --group-add "$(stat -c %g /var/run/docker.sock)"
USER 10001:10001
WORKDIR /var/lib/perfgate-agent
VOLUME /var/lib/perfgate-agent
ENV HOME=/var/lib/perfgate-agent PERFGATE_AGENT_RELAY_BIN=/usr/local/lib/perfgate/relay \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# Healthy while the agent can reach the Docker daemon it starts engines on.
HEALTHCHECK --interval=60s --timeout=10s --start-period=10s --retries=3 \
  CMD ["docker", "version", "--format", "{{.Server.Version}}"]
ENTRYPOINT ["perfgate", "agent"]
CMD ["--state-dir", "/var/lib/perfgate-agent"]
