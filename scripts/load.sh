#!/bin/sh
# load.sh: the load targets of docs/reliability.md at full size, against a
# freshly built mcpbox. Run as root from the repository root, with the npm
# peers installed (npm ci --prefix test/e2e/node). Each run prints its
# summary; add -json to MCPBOX_LOAD_FLAGS for every sample. Exits 1 if a
# run missed a target.
set -eu
out=$(mktemp -d /tmp/mcpbox-load-run-XXXXXX)
trap 'rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$out/mcpbox" ./cmd/mcpbox
go build -o "$out/mcpbox-load" ./cmd/mcpbox-load
nm=$(pwd)/test/e2e/node/node_modules
flags="-mcpbox $out/mcpbox -node-modules $nm ${MCPBOX_LOAD_FLAGS:-}"
status=0
run() {
	echo "== mcpbox-load $*"
	uptime
	"$out/mcpbox-load" $flags "$@" || status=1
}
# 50 sessions × 400 calls, as fast as they go, then paced.
run -server both -clients 1 -sessions 50 -calls 400
run -server both -clients 1 -sessions 50 -calls 400 -rate 400
# 100 clients (identities) × 200 calls.
run -server both -clients 100 -calls 200
# 1,000 sessions opened and closed: the leak check.
run -scenario churn -sessions 1000 -settle 10s
exit $status
