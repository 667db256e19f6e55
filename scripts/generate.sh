#!/usr/bin/env bash
# Regenerates the Go code of the project's protocol buffers (the trigger
# plugin protocol in plugins/internal/pluginpb). Installs protoc from Debian's
# protobuf-compiler when it is missing, and the Go code generators at pinned
# versions. CI does not run this: the generated code is committed and must be
# regenerated (and committed) whenever a .proto changes.
set -euo pipefail
GO=${GO:-go}
PROTOC_GEN_GO_VERSION=v1.36.12      # google.golang.org/protobuf, as in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0   # google.golang.org/grpc/cmd/protoc-gen-go-grpc
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null 2>&1; then
  echo "generate: installing protoc (Debian package protobuf-compiler)"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq protobuf-compiler
fi

gobin=$("$GO" env GOPATH)/bin
export PATH="$gobin:$PATH"
want_version() { # tool version: true when the installed tool reports version
  command -v "$1" >/dev/null 2>&1 && "$1" --version 2>&1 | grep -q -- "${2#v}"
}
want_version protoc-gen-go "$PROTOC_GEN_GO_VERSION" ||
  GOFLAGS= "$GO" install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
want_version protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" ||
  GOFLAGS= "$GO" install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

protoc --proto_path=plugins/internal/pluginpb \
  --go_out=plugins/internal/pluginpb --go_opt=paths=source_relative \
  --go-grpc_out=plugins/internal/pluginpb --go-grpc_opt=paths=source_relative \
  plugins/internal/pluginpb/trigger.proto
echo "generate: plugins/internal/pluginpb regenerated with $(protoc --version), protoc-gen-go $PROTOC_GEN_GO_VERSION, protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION"
