# cozy-aio for people who build with Docker. `make image` builds the same
# image without a Docker daemon (hack/image, internal/image).
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t cozy-aio .

FROM --platform=$BUILDPLATFORM golang:1.27 AS build
ARG TARGETOS TARGETARCH VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static, stripped, without kustomize's Go plugin loader: the flags of
# `make build` and internal/image.BuildBinaries.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -tags kustomize_disable_go_plugin_support \
      -ldflags "-s -w -X main.version=${VERSION}" -o /out/cozy-aio ./cmd/cozy-aio

# distroless/static: CA roots, /tmp and nothing else. The static pod runs
# /cozy-aio as root for its host paths.
FROM gcr.io/distroless/static-debian12
ARG VERSION=dev REVISION=""
LABEL org.opencontainers.image.title="cozy-aio" \
      org.opencontainers.image.source="https://github.com/cozystack/cozy-aio" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/cozy-aio /cozy-aio
ENTRYPOINT ["/cozy-aio", "run"]
