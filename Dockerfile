# perfgate: one image for the server (`perfgate serve`) and the GPU runner
# agent (`perfgate agent`).
#
# go-nvml needs cgo, so the binary is built with CGO_ENABLED=1 against glibc
# and runs on a glibc base. libnvidia-ml itself is not in the image: on a GPU
# host the NVIDIA container toolkit mounts the driver's copy at run time
# (`docker run --gpus all …`); without it the agent logs that telemetry is
# unavailable and carries on.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
RUN go build -trimpath -ldflags "-s -w" -o /out/perfgate ./cmd/perfgate

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/perfgate --create-home perfgate
COPY --from=build /out/perfgate /usr/local/bin/perfgate
USER perfgate
WORKDIR /var/lib/perfgate
# Embedded SQLite by default; set PERFGATE_DATABASE_URL=postgres://… for
# several replicas.
ENV PERFGATE_DATABASE_URL=/var/lib/perfgate/perfgate.db
EXPOSE 8080
ENTRYPOINT ["perfgate"]
CMD ["serve"]
