# Image of the aisched binary, for the manifests in deploy/.
#   docker build -t ghcr.io/aisched/aisched:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/aisched/aisched/pkg/version.gitVersion=${VERSION}" \
      -o /out/aisched ./cmd/aisched

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/aisched /usr/local/bin/aisched
ENTRYPOINT ["/usr/local/bin/aisched"]
