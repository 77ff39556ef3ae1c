#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after another, for a fixed
# budget each, and prints a table: executions, new interesting inputs,
# corpus size and coverage bits (at the start -> at the end) per target.
# A target that fails leaves its input in its package's testdata/fuzz/ (to
# be committed as a regression case once fixed); the script then exits 1.
# A target whose fuzzing build fails (e.g. a nosplit function over the
# stack limit once instrumented) finds nothing by chance: exit 3.
#
# usage: scripts/fuzz.sh [-parallel N] [-run REGEX] [-part K/N] [-minimize M] [BUDGET]
#   BUDGET       -fuzztime per target: a duration or Nx (default 60s)
#   -parallel N  fuzzing workers per target (default 1)
#   -run REGEX   only the targets whose "pkg.FuzzName" matches (grep -E)
#   -part K/N    only the targets of every Nth package with fuzz targets,
#                from the Kth (0-based): the fuzzing build of a package
#                compiles it and its dependencies again, instrumented
#   -minimize M  -fuzzminimizetime (default 100x: minimizing each new
#                input for the default 60s would eat a short budget)
set -euo pipefail
cd "$(dirname "$0")/.."

budget=60s parallel=1 run=. minimize=100x part=0/1
while [ $# -gt 0 ]; do
	case $1 in
	-parallel) parallel=$2; shift 2 ;;
	-run) run=$2; shift 2 ;;
	-part) part=$2; shift 2 ;;
	-minimize) minimize=$2; shift 2 ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
	*) budget=$1; shift ;;
	esac
done

# A hung target must not hang the run: allow the budget plus 5 minutes.
case $budget in
*[0-9]s) secs=${budget%s} ;;
*[0-9]m) secs=$(( ${budget%m} * 60 )) ;;
*[0-9]h) secs=$(( ${budget%h} * 3600 )) ;;
*) secs=3600 ;;
esac
case $secs in '' | *[!0-9]*) secs=3600 ;; esac
timeout=$(( secs + 300 ))s

# "pkg FuzzName" per target, from go test -list (which prints a package's
# names before its "ok pkg" line). Only packages whose tests declare a
# fuzz target are listed: listing runs TestMain, and the e2e package's
# builds the binary.
dirs=$(grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' . | xargs -r -n1 dirname | sort -u)
if [ -z "$dirs" ]; then
	echo "fuzz.sh: no fuzz targets" >&2
	exit 2
fi
case $part in
[0-9]*/[1-9]*) k=${part%/*} n=${part#*/} ;;
*) echo "fuzz.sh: -part wants K/N, got $part" >&2; exit 2 ;;
esac
case $k$n in *[!0-9]*) echo "fuzz.sh: -part wants K/N, got $part" >&2; exit 2 ;; esac
if [ "$k" -ge "$n" ]; then
	echo "fuzz.sh: -part $part: K must be below N" >&2
	exit 2
fi
dirs=$(printf '%s\n' $dirs | awk -v k="$k" -v n="$n" '(NR - 1) % n == k')
# shellcheck disable=SC2086 # one word per directory
targets=$(go test -list '^Fuzz' $dirs | awk '
	/^Fuzz/ { names[n++] = $1; next }
	/^ok/ { for (i = 0; i < n; i++) print $2, names[i]; n = 0; next }
	{ n = 0 }')
targets=$(printf '%s\n' "$targets" | while read -r pkg name; do
	[ -n "$pkg" ] && printf '%s.%s\n' "${pkg#mcpbox/}" "$name" | grep -qE -- "$run" && echo "$pkg $name"
done || true)
if [ -z "$targets" ]; then
	echo "fuzz.sh: no fuzz targets match $run" >&2
	exit 2
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
row() { printf '%-24s %-22s %-5s %12s %8s %5s %7s %s\n' "$@"; }
echo "fuzz: $(printf '%s\n' "$targets" | wc -l) targets, -fuzztime $budget, -parallel $parallel, -fuzzminimizetime $minimize"
row TARGET PACKAGE RESULT EXECS EXECS/S NEW CORPUS "COV BITS"
failed=0 broken=0 start=$SECONDS
while read -r pkg name; do
	log=$logs/$name.log
	result=ok
	GODEBUG=fuzzdebug=1 go test -run '^$' -fuzz "^$name\$" -fuzztime "$budget" \
		-fuzzminimizetime "$minimize" -parallel "$parallel" -timeout "$timeout" "$pkg" >"$log" 2>&1 || result=FAIL
	# The fuzzing engine of go test can end a short run with "context
	# deadline exceeded" and no failing input: its own timing, not a
	# finding. A finding always writes its input.
	if [ $result = FAIL ] && ! grep -q 'Failing input written to\|panic:' "$log" &&
		grep -q 'context deadline exceeded' "$log"; then
		result=deadline
	fi
	if [ $result = FAIL ] && grep -qE '\[(build|setup) failed\]' "$log"; then
		result=build
	fi
	# fuzz: elapsed: 20s, execs: 243 (12/sec), new interesting: 6 (total: 19)
	status=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$status")
	elapsed=$(sed -nE 's/^fuzz: elapsed: ([0-9]+)s.*/\1/p' <<<"$status")
	new=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$status")
	corpus=$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$status")
	bits0=$(sed -nE 's/.*initial coverage bits: ([0-9]+).*/\1/p' "$log" | tail -1)
	bits1=$(sed -nE 's/.*total bits: ([0-9]+).*/\1/p' "$log" | tail -1)
	if [ -z "$status" ] && [ $result = ok ]; then
		execs=0 new=0 # the budget ran out while the corpus was being measured
		corpus=$(sed -nE 's/.*gathering baseline coverage: ([0-9]+)\/.*/\1/p' "$log" | tail -1)
	fi
	rate=-
	if [ -n "$execs" ] && [ "${elapsed:-0}" -gt 0 ]; then rate=$(( execs / elapsed )); fi
	row "$name" "${pkg#mcpbox/}" "$result" "${execs:--}" "$rate" "${new:--}" "${corpus:--}" "${bits0:--} -> ${bits1:-${bits0:--}}"
	if [ $result = FAIL ] || [ $result = build ]; then
		if [ $result = FAIL ]; then failed=1; else broken=1; fi
		grep -vE '^fuzz: elapsed| DEBUG ' "$log" | tail -40 | sed 's/^/    /'
	fi
done <<<"$targets"
echo "fuzz: done in $(( SECONDS - start ))s"
if [ $broken = 1 ]; then exit 3; fi
exit $failed
