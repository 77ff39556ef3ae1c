#!/usr/bin/env bash
# Builds the control plane the Kubernetes tests run against (internal/kube/kubetest):
# kube-apiserver and kube-controller-manager from k8s.io/kubernetes, and etcd from
# go.etcd.io/etcd/server/v3/embed, all through the Go module proxy (no other download).
#
# Output: ${MCPBOX_KUBE_CACHE:-$HOME/.cache/mcpbox-ci}/kube-<k8s>-etcd-<etcd>/
#   kube-apiserver kube-controller-manager etcd COMPLETE
# A cache dir with COMPLETE is reused as it is (a second run returns at once), so CI
# builds the binaries once per machine. Prints the directory on its last line.
#
# Why the detour: k8s.io/kubernetes' go.mod replaces every k8s.io/* staging module with
# ./staging/src/..., which `go install pkg@version` refuses, and its module zip leaves
# staging out. So the module is copied to a build dir, the replaces are dropped and the
# staging modules are required at their published v0.X.Y versions instead.
set -euo pipefail

K8S_VERSION=${MCPBOX_KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${MCPBOX_ETCD_VERSION:-v3.7.0} # the etcd that k8s.io/kubernetes pins
CACHE=${MCPBOX_KUBE_CACHE:-$HOME/.cache/mcpbox-ci}
OUT="$CACHE/kube-$K8S_VERSION-etcd-$ETCD_VERSION"

if [ -f "$OUT/COMPLETE" ] && [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/kube-controller-manager" ] && [ -x "$OUT/etcd" ]; then
	echo "$OUT"
	exit 0
fi

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
patch=${K8S_VERSION##*.}
STAGING_VERSION="v0.$minor.$patch"

mkdir -p "$CACHE"
# One build at a time per cache (CI and a developer may start together); the second
# waits and then finds the cache complete.
exec 9>"$CACHE/.kube-bins.lock"
flock 9
if [ -f "$OUT/COMPLETE" ]; then
	echo "$OUT"
	exit 0
fi
BUILD=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'chmod -R u+w "$BUILD" 2>/dev/null; rm -rf "$BUILD"' EXIT
start=$(date +%s)
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

# The module proxy fails a request now and then (a fresh machine's CI run
# lost its Kubernetes tests to one): a step that downloads is tried three
# times, and what failed is shown (go mod download -json says it on stdout).
retry() {
	local i out
	for i in 1 2 3; do
		if out=$("$@" 2>&1); then
			printf '%s\n' "$out"
			return 0
		fi
		echo "kube-bins: $1 $2 failed (try $i of 3):" >&2
		printf '%s\n' "$out" | grep -v '^go: downloading' | tail -n 8 >&2
		[ "$i" = 3 ] || sleep $((i * 15))
	done
	return 1
}

echo "kube-bins: fetching k8s.io/kubernetes@$K8S_VERSION" >&2
json=$(cd "$BUILD" && retry go mod download -json "k8s.io/kubernetes@$K8S_VERSION")
src=$(printf '%s\n' "$json" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "kube-bins: go mod download gave no directory for k8s.io/kubernetes@$K8S_VERSION" >&2; exit 1; }
mkdir "$BUILD/kubernetes"
cp -r "$src/." "$BUILD/kubernetes/"
chmod -R u+w "$BUILD/kubernetes"
cd "$BUILD/kubernetes"
rm -f go.work go.work.sum
# Drop the staging replaces; require the published staging modules instead of v0.0.0.
sed -i -e '/=> \.\/staging\//d' \
	-e "s#^\(\tk8s\.io/[a-z0-9-]*\) v0\.0\.0\$#\1 $STAGING_VERSION#" go.mod
grep -q ' v0\.0\.0$' go.mod && { echo "kube-bins: go.mod still requires v0.0.0 modules:" >&2; grep ' v0\.0\.0$' go.mod >&2; exit 1; }

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
# etcd is built from a main of our own inside the same module, so that it
# links the versions k8s.io/kubernetes pins (it requires etcd/server) and
# shares their compiled packages (gRPC, protobuf, the etcd client).
pinned=$(sed -n 's#^\tgo\.etcd\.io/etcd/server/v3 \(v[^ ]*\).*#\1#p' go.mod)
[ "$pinned" = "$ETCD_VERSION" ] || { echo "kube-bins: k8s.io/kubernetes@$K8S_VERSION pins etcd/server $pinned, not $ETCD_VERSION" >&2; exit 1; }
mkdir -p cmd/mcpbox-etcd "$BUILD/out"
cat >cmd/mcpbox-etcd/main.go <<'EOF'
// Command etcd runs a single-member etcd from go.etcd.io/etcd/server/v3/embed for the
// Kubernetes tests: flags for data dir and the client and peer URLs, nothing else.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory")
	listenClient := flag.String("listen-client-urls", "http://127.0.0.1:2379", "client URL")
	listenPeer := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	cu, err := url.Parse(*listenClient)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(*listenPeer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.UnsafeNoFsync = true // test data: durability across a crash is not needed
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	<-e.Server.ReadyNotify()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Print(err)
	}
	e.Close()
}
EOF
# One build of all three: their shared packages compile once and the links
# run side by side. No DWARF (-dwarf=false, -w): nobody debugs these, and
# generating it is compile time.
echo "kube-bins: building kube-apiserver, kube-controller-manager $K8S_VERSION and etcd $ETCD_VERSION (minutes on a fresh machine)" >&2
# It downloads the modules it needs: retried too (what compiled before a
# failed download is in the build cache).
retry go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$BUILD/out/" ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/mcpbox-etcd >&2
mv "$BUILD/out/mcpbox-etcd" "$BUILD/out/etcd"

touch "$BUILD/out/COMPLETE"
rm -rf "$OUT"
mv "$BUILD/out" "$OUT"
echo "kube-bins: built in $(($(date +%s) - start))s: $(du -sh "$OUT" | cut -f1) in $OUT" >&2
echo "$OUT"
