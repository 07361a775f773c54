# syntax=docker/dockerfile:1.7
# driftstream: the consumer (service) and producer binaries, static, on a
# distroless base, running as a non-root user.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t driftstream .

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download && go mod verify
COPY . .
ENV CGO_ENABLED=0 GOOS=linux
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/consumer ./cmd/consumer && \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/producer ./cmd/producer

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="driftstream" \
      org.opencontainers.image.description="Per-key online learning on drifting Kafka streams" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/driftstream/driftstream"
COPY --from=build /out/consumer /out/producer /usr/local/bin/
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/consumer"]
