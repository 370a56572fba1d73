# The squeeze image: one static binary on a distroless base (CA
# certificates for rediss:// and TLS, no shell), run as a non-root user.
#
#   docker build -t squeeze:v0.1.0 --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run --rm squeeze:v0.1.0 version
#
# deploy/kubernetes-sidecar.yaml runs it as a sidecar. Multi-platform:
# docker buildx build --platform linux/amd64,linux/arm64 ... (the builder
# cross-compiles; nothing runs under emulation).

# The Go of go.mod's "go" line; pin a patch release with
# --build-arg GO_VERSION=1.26.x.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION and COMMIT name the build in "squeeze version" (the .git
# directory stays out of the build context, so Go records no commit).
# Without VERSION the binary names the latest release in CHANGELOG.md.
ARG VERSION=""
ARG COMMIT=""
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w${VERSION:+ -X main.Version=$VERSION}${COMMIT:+ -X main.Commit=$COMMIT}" \
      -o /out/squeeze ./cmd/squeeze

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
ARG COMMIT=""
LABEL org.opencontainers.image.title="squeeze" \
      org.opencontainers.image.description="RESP proxy that compresses Redis values, and its command line" \
      org.opencontainers.image.source="https://github.com/squeeze-kv/squeeze" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/squeeze /usr/local/bin/squeeze
# distroless's "nonroot" user, by number: Kubernetes' runAsNonRoot can
# check a numeric user without reading /etc/passwd.
USER 65532:65532
# 6380: the proxy (--listen), 9121: metrics and probes (--metrics).
EXPOSE 6380 9121
ENTRYPOINT ["/usr/local/bin/squeeze"]
CMD ["proxy", "--help"]
