#!/bin/sh
# bench-density.sh: the memory per idle and paused sandbox as a user runs
# mcpbox (issue 19): builds mcpbox and mcpbox-init together from a clean
# clone of HEAD with -buildvcs=true (so that mcpbox trusts and starts the
# lean init) and runs BenchmarkIdleMemoryBinaries against them, with mcpbox
# re-executing itself as the baseline measured in the same run.
#   scripts/bench-density.sh            # 20 sandboxes side by side
#   MCPBOX_IDLE_N=200 scripts/bench-density.sh
set -eu
repo=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-hardlinks "$repo" "$tmp/src"
git -C "$tmp/src" checkout -q "$(git -C "$repo" rev-parse HEAD)"
mkdir "$tmp/bin"
(cd "$tmp/src" && CGO_ENABLED=0 go build -buildvcs=true -o "$tmp/bin/mcpbox" ./cmd/mcpbox &&
	CGO_ENABLED=0 go build -buildvcs=true -o "$tmp/bin/mcpbox-init" ./cmd/mcpbox-init)
chmod 755 "$tmp" "$tmp/bin"
cd "$repo"
MCPBOX_BENCH_BIN="$tmp/bin" go test ./test/e2e -run '^$' -bench 'IdleMemoryBinaries' \
	-benchtime 1x -timeout 60m -v "$@"
