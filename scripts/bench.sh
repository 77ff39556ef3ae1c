#!/usr/bin/env bash
# Runs the performance benchmarks of issue 19 on this machine and prints
# its table (docs/performance.md): each row's figure now, its baseline
# measured in the same run, the target and whether it is met, from the
# medians of the reported metrics over -count runs. The raw `go test`
# output of each benchmark is kept in the output directory (benchstat
# reads it: `benchstat OLD/exec.txt NEW/exec.txt`), with table.md.
#
# usage: scripts/bench.sh [--quick] [--out DIR]
#   --quick    a smoke run of about two minutes: few iterations, 64 MiB
#              download, 5 sandboxes side by side (the figures are rough)
#   --out DIR  where the raw output and table.md go (default: a new
#              /tmp/mcpbox-bench-YYYYmmdd-HHMMSS)
# The default (full) run takes 5-15 minutes: 1 GiB downloads, 20
# sandboxes side by side, 3-10 runs of each benchmark. Run it as root
# (cgroups) on a machine as quiet as you can get: the wall-clock figures
# move with every other process. Benchmarks that this tree does not have
# print "not measured (benchmark absent)". Exits 1 if a benchmark failed,
# 0 otherwise (a missed target is a figure, not a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

mode=full out=""
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick; shift ;;
	--out) out=${2:?--out needs a directory}; shift 2 ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

# Iterations per mode: -benchtime per run and -count runs (the table
# shows medians over the runs), and the sizes the issue asks for.
if [ "$mode" = quick ]; then
	exec_bt=10x exec_n=3
	egress_bytes=$((64 << 20)) egress_n=2
	gw_bt=300x gw_n=2
	idle_sandboxes=5 idle_n=1
	wake_bt=30x wake_n=2
	warm_bt=20x warm_n=2
	limit=10m
else
	exec_bt=40x exec_n=10
	egress_bytes=$((1 << 30)) egress_n=6
	gw_bt=2000x gw_n=6
	idle_sandboxes=20 idle_n=3
	wake_bt=200x wake_n=5
	warm_bt=200x warm_n=5
	limit=30m
fi

tmp=$(mktemp -d /tmp/mcpbox-bench-tmp-XXXXXX)
bg=() # processes this script started and must not leave behind
cleanup() {
	local p
	for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$out" ]; then
	out=/tmp/mcpbox-bench-$(date -u +%Y%m%d-%H%M%S)
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# A reused directory must not lend this run an earlier run's figures.
rm -f "$out"/{exec,spawn,egress,gateway,memory,wake,warm}.txt "$out/table.md"

# ---- what the benchmarks need
echo "== setup ($mode run; raw output in $out)" >&2
command -v go >/dev/null || { echo "bench.sh: go is not installed" >&2; exit 1; }
have_bwrap=1 have_curl=1
if ! command -v bwrap >/dev/null; then
	have_bwrap=0
	echo "warning: bwrap not found: the bubblewrap baselines are not measured (apt-get install bubblewrap)" >&2
fi
if ! command -v curl >/dev/null; then
	have_curl=0
	echo "warning: curl not found: the download row is not measured (apt-get install curl)" >&2
fi
if [ "$(id -u)" != 0 ]; then
	echo "warning: not root: sandboxes may run without cgroups, and the limits rows measure less than they should" >&2
fi

# has PKGDIR NAME: whether the package's tests define benchmark NAME
# (branches merged later add some).
has() {
	grep -qs "^func $2(" "$1"/*_test.go
}

# One test binary per package, built once (as .ci/run builds: no cgo for
# mcpbox, which test/e2e's TestMain builds itself into its own temp dir).
build() { # PKGDIR NAME
	echo "== go test -c ./$1" >&2
	go test -c -o "$tmp/$2.test" "./$1"
}
need_sandbox=0 need_e2e=0
for b in BenchmarkExecTrue BenchmarkWarmStart; do
	if has internal/sandbox "$b"; then need_sandbox=1; fi
done
for b in BenchmarkExecCLI BenchmarkEgressDownload BenchmarkGatewayCall BenchmarkIdleMemory BenchmarkWake; do
	if has test/e2e "$b"; then need_e2e=1; fi
done
if [ $need_sandbox = 1 ]; then build internal/sandbox sandbox; fi
if [ $need_e2e = 1 ]; then build test/e2e e2e; fi

# The CLI rows run mcpbox as docs/quickstart.md installs it: mcpbox and
# mcpbox-init built together with -buildvcs=true from a clean clone of
# HEAD. Built here, in a worktree or from a modified tree, mcpbox carries
# no VCS stamp, trusts no mcpbox-init and re-executes itself as the init,
# paying its own start-up twice; BenchmarkExecCLI reports that too, as
# the rows' second figure.
lean_bin=""
if has test/e2e BenchmarkExecCLI; then
	echo "== go build ./cmd/mcpbox ./cmd/mcpbox-init -buildvcs=true in a clean clone of HEAD" >&2
	if git clone -q --no-hardlinks "$root" "$tmp/src" && git -C "$tmp/src" checkout -q "$(git rev-parse HEAD)" &&
		mkdir "$tmp/bin" && (cd "$tmp/src" &&
		CGO_ENABLED=0 go build -buildvcs=true -o "$tmp/bin/mcpbox" ./cmd/mcpbox &&
		CGO_ENABLED=0 go build -buildvcs=true -o "$tmp/bin/mcpbox-init" ./cmd/mcpbox-init); then
		chmod 755 "$tmp" "$tmp/bin"
		lean_bin=$tmp/bin
	else
		echo "warning: could not build mcpbox with mcpbox-init from a clean clone: the CLI rows show mcpbox re-executed as the init only" >&2
	fi
fi

# ---- the runs
failed=()
declare -A status # raw file name -> ok | absent | failed | skipped: WHY

# run NAME PKGDIR BENCHFUNC REGEX BENCHTIME COUNT [VAR=VALUE...]: runs the
# benchmarks REGEX (default: BENCHFUNC alone) if the package has BENCHFUNC,
# from its package directory (as `go test` does), bounded by -test.timeout
# and by timeout(1) a little later, into $out/NAME.txt.
run() {
	local name=$1 dir=$2 fn=$3 re=${4:-^$3\$} bt=$5 n=$6 bin
	shift 6
	if ! has "$dir" "$fn"; then
		status[$name]=absent
		echo "== $name: $fn absent on this tree" >&2
		return 0
	fi
	bin=$tmp/$(basename "$dir").test
	[ "$dir" = internal/sandbox ] && bin=$tmp/sandbox.test
	[ "$dir" = test/e2e ] && bin=$tmp/e2e.test
	echo "== $name: $re -benchtime $bt -count $n $* (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	if (cd "$root/$dir" && env "$@" timeout --kill-after=30s "$(to_secs $limit)" \
		"$bin" -test.run '^$' -test.bench "$re" -test.benchtime "$bt" -test.count "$n" \
		-test.timeout "$limit") >"$out/$name.txt" 2>&1; then
		status[$name]=ok
	else
		status[$name]=failed
		failed+=("$name")
		echo "FAILED: $fn (see $out/$name.txt):" >&2
		grep -vE '^(Benchmark|goos|goarch|pkg|cpu)' "$out/$name.txt" | tail -n 15 >&2 || true
	fi
	grep -E '^Benchmark' "$out/$name.txt" >&2 || true
}
to_secs() { # 10m -> 630 (the limit plus a margin for the timeout(1) bound)
	echo $((${1%m} * 60 + 30))
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# Its mcpbox rows start the lean mcpbox-init: the one built above from the
# clean clone if there is one, else the benchmark builds its own.
run exec internal/sandbox BenchmarkExecTrue "" "$exec_bt" "$exec_n" ${lean_bin:+MCPBOX_BENCH_INIT="$lean_bin/mcpbox-init"}
# The same through the CLI (`mcpbox exec`), with and without mcpbox-init.
run spawn test/e2e BenchmarkExecCLI "" "$exec_bt" "$exec_n" ${lean_bin:+MCPBOX_BENCH_BIN="$lean_bin"}
if [ $have_curl = 1 ]; then
	run egress test/e2e BenchmarkEgressDownload "" 1x "$egress_n" MCPBOX_BENCH_BYTES="$egress_bytes"
else
	status[egress]="skipped: curl not installed (apt-get install curl)"
fi
run gateway test/e2e BenchmarkGatewayCall "" "$gw_bt" "$gw_n"
run memory test/e2e BenchmarkIdleMemory "" 1x "$idle_n" MCPBOX_IDLE_N="$idle_sandboxes"
# The same as installed (mcpbox with mcpbox-init, scripts/bench-density.sh):
# the memory rows' figure when it was measured.
if [ -n "$lean_bin" ]; then
	run density test/e2e BenchmarkIdleMemoryBinaries "" 1x "$idle_n" MCPBOX_IDLE_N="$idle_sandboxes" MCPBOX_BENCH_BIN="$lean_bin"
else
	status[density]="skipped: no mcpbox-init built"
fi
run wake test/e2e BenchmarkWake "" "$wake_bt" "$wake_n"
run warm internal/sandbox BenchmarkWarmStart "" "$warm_bt" "$warm_n"

# bubblewrap's memory: the baseline of the idle-memory row, with as many
# bwrap sandboxes side by side (each idle in sleep) as the mcpbox run had.
# Prints "USS PSS" in MiB per sandbox of the bwrap processes (not sleep).
bwrap_memory() {
	local n=$1 i p kids pids=() all=() u=0 s=0 line
	for ((i = 0; i < n; i++)); do
		bwrap --unshare-all --die-with-parent --new-session \
			--ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
			--symlink usr/lib64 /lib64 --proc /proc --dev /dev --tmpfs /tmp \
			--cap-drop ALL -- /bin/sleep 120 </dev/null >/dev/null 2>&1 &
		pids+=($!)
		bg+=($!)
	done
	sleep 2
	for p in "${pids[@]}"; do
		all+=("$p")
		kids=$(pgrep -P "$p" -x bwrap || true) # the sandbox's pid 1
		for i in $kids; do all+=("$i"); done
	done
	for p in "${all[@]}"; do
		line=$(awk '/^Private_(Clean|Dirty):/ {u += $2} /^Pss:/ {s += $2} END {print u + 0, s + 0}' \
			"/proc/$p/smaps_rollup" 2>/dev/null) || continue
		u=$((u + ${line% *})) s=$((s + ${line#* }))
	done
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	awk -v u="$u" -v s="$s" -v n="$n" 'BEGIN {printf "%.2f %.2f\n", u / 1024 / n, s / 1024 / n}'
}
bw_mem=""
if [ $have_bwrap = 1 ]; then
	echo "== bubblewrap memory: $idle_sandboxes sandboxes side by side" >&2
	bw_mem=$(bwrap_memory "$idle_sandboxes") || bw_mem=""
fi

# ---- the table
# med FILE BENCH UNIT: the median over the runs of metric UNIT of BENCH
# (its name without the -GOMAXPROCS suffix); empty if never reported.
med() {
	[ -f "$out/$1.txt" ] || return 0
	awk -v name="$2" -v unit="$3" '
		/^Benchmark/ {
			n = $1; sub(/-[0-9]+$/, "", n)
			if (n != name) next
			for (i = 3; i < NF; i += 2) if ($(i + 1) == unit) print $i
		}' "$out/$1.txt" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
# f DIGITS EXPR: EXPR computed and printed with DIGITS decimals.
f() { awk "BEGIN { printf \"%.$1f\", $2 }"; }
# sf: f with its sign, for a difference that noise can make negative.
sf() { awk "BEGIN { printf \"%+.$1f\", $2 }"; }
# le A B: A <= B (numbers).
le() { awk "BEGIN { exit !($1 <= $2) }"; }
# why NAME: the reason a row has no figures.
why() {
	case ${status[$1]:-} in
	absent) echo "not measured (benchmark absent)" ;;
	failed) echo "not measured (benchmark failed: $out/$1.txt)" ;;
	skipped:*) echo "not measured (${status[$1]#skipped: })" ;;
	*) echo "not measured (no result: $out/$1.txt)" ;;
	esac
}
yesno() { if "$@"; then echo yes; else echo "**no**"; fi; }

row() { printf '| %s | %s | %s | %s | %s |\n' "$@"; }
{
	echo "## mcpbox performance, $(date -u '+%Y-%m-%d %H:%M UTC'), $mode run"
	echo
	echo "$(nproc) CPUs, $(uname -r), load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end;" \
		"medians over -count runs; raw output: $out"
	echo
	row what "mcpbox now" "baseline (same run)" target "met?"
	row --- --- --- --- ---

	# exec /bin/true: library level. Where BenchmarkExecTrue has a
	# mcpbox-testinit variant, its mcpbox ones start the lean mcpbox-init,
	# as `mcpbox exec` does; before, the test binary was the init.
	lean_exec=0
	grep -q '^BenchmarkExecTrue/mcpbox-testinit' "$out/exec.txt" 2>/dev/null && lean_exec=1
	plain=$(med exec BenchmarkExecTrue/plain ns/op)
	bwr=$(med exec BenchmarkExecTrue/bwrap ns/op)
	base="plain exec not measured"
	[ -n "$plain" ] && base="plain exec $(f 1 "$plain/1e6") ms"
	if [ -n "$bwr" ]; then
		base+="; bwrap $(f 1 "$bwr/1e6") ms (no limits, no seccomp, no Landlock)"
	else
		base+="; bwrap not measured"
	fi
	exec_fig() { # SUB: "N ms: +N ms over plain, N× bwrap; CPU N ms, N× bwrap's"
		local ns over xb cpu cxb fig
		ns=$(med exec "BenchmarkExecTrue/$1" ns/op)
		[ -z "$ns" ] && return 0
		over=$(med exec "BenchmarkExecTrue/$1" ms-over-plain)
		xb=$(med exec "BenchmarkExecTrue/$1" x-bwrap)
		cpu=$(med exec "BenchmarkExecTrue/$1" cpu-ms/op)
		cxb=$(med exec "BenchmarkExecTrue/$1" cpu-x-bwrap)
		fig="$(f 1 "$ns/1e6") ms: +$(f 1 "$over") ms over plain"
		[ -n "$xb" ] && fig+=", $(f 2 "$xb")× bwrap"
		fig+="; CPU $(f 1 "$cpu") ms"
		[ -n "$cxb" ] && fig+=", $(f 2 "$cxb")× bwrap's"
		echo "$fig"
	}
	for v in mcpbox mcpbox-nolimits; do
		what="\`exec -- /bin/true\`, all layers and limits"
		target="≤ bwrap, ≤ plain + 4 ms"
		[ $v = mcpbox-nolimits ] && what="same with no memory/pids limits (no cgroup)" target="— (the issue sets none)"
		ns=$(med exec "BenchmarkExecTrue/$v" ns/op)
		if [ -z "$ns" ]; then
			row "$what" "$(why exec)" "" "$target" "—"
			continue
		fi
		over=$(med exec "BenchmarkExecTrue/$v" ms-over-plain)
		xb=$(med exec "BenchmarkExecTrue/$v" x-bwrap)
		now=$(exec_fig $v)
		if [ $lean_exec = 1 ]; then
			now+=" (mcpbox-init)"
			ti=$(exec_fig mcpbox-testinit)
			[ $v = mcpbox ] && [ -n "$ti" ] && now+="; the test binary as the init: $ti"
		else
			now+=" (the test binary as the init)"
		fi
		met=$(yesno le "$over" 4)
		if [ -z "$xb" ]; then
			met="? (no bwrap)"
		elif ! le "$xb" 1; then
			met="**no**"
		fi
		[ $v = mcpbox-nolimits ] && met="— (no target)"
		row "$what" "$now" "$base" "$target" "$met"
	done

	# The same through the CLI (BenchmarkExecCLI: mcpbox's own start-up
	# included; one plain and one bwrap start in turn in every round).
	plain=$(med spawn BenchmarkExecCLI/plain ns/op)
	bwr=$(med spawn BenchmarkExecCLI/bwrap ns/op)
	base="plain exec not measured"
	[ -n "$plain" ] && base="plain exec $(f 1 "$plain/1e6") ms"
	if [ -n "$bwr" ]; then
		base+="; bwrap $(f 1 "$bwr/1e6") ms"
	else
		base+="; bwrap not measured"
	fi
	# cli_fig SUB: the figures of BenchmarkExecCLI/SUB, empty if none.
	cli_fig() {
		local b=BenchmarkExecCLI/$1 ns xb cxb fig
		ns=$(med spawn "$b" ns/op)
		[ -n "$ns" ] || return 0
		fig="$(f 1 "$ns/1e6") ms: +$(f 1 "$(med spawn "$b" ms-over-plain)") ms over plain"
		xb=$(med spawn "$b" x-bwrap)
		[ -n "$xb" ] && fig+=", $(f 2 "$xb")× bwrap"
		fig+="; CPU $(f 1 "$(med spawn "$b" cpu-ms/op)") ms"
		cxb=$(med spawn "$b" cpu-x-bwrap)
		[ -n "$cxb" ] && fig+=", $(f 2 "$cxb")× bwrap's"
		echo "$fig"
	}
	for v in "" -nolimits; do
		what="\`mcpbox exec -- /bin/true\` (the CLI), all layers and limits"
		target="≤ bwrap, ≤ plain + 4 ms"
		[ "$v" = -nolimits ] && what="same with \`--memory 0 --pids 0\`" target="— (the issue sets none)"
		lean=$(cli_fig "lean$v") alone=$(cli_fig "mcpbox$v")
		if [ -z "$lean$alone" ]; then
			row "$what" "$(why spawn)" "" "$target" "—"
			continue
		fi
		sub=lean$v now="$lean (with mcpbox-init)"
		if [ -z "$lean" ]; then
			sub=mcpbox$v now="$alone (mcpbox re-executed as the init; mcpbox-init not built)"
		elif [ -n "$alone" ]; then
			now+="; without mcpbox-init, mcpbox re-executed as the init: $alone"
		fi
		met="— (no target)"
		if [ -z "$v" ]; then
			met=$(yesno le "$(med spawn "BenchmarkExecCLI/$sub" ms-over-plain)" 4)
			xb=$(med spawn "BenchmarkExecCLI/$sub" x-bwrap)
			if [ -z "$xb" ]; then
				met="? (no bwrap)"
			elif ! le "$xb" 1; then
				met="**no**"
			fi
		fi
		row "$what" "$now" "$base" "$target" "$met"
	done

	# The download through the egress path.
	size=$(f 0 "$egress_bytes/1048576")
	what="$size MiB download by curl inside the sandbox through the egress path, incl. start"
	[ "$egress_bytes" = $((1 << 30)) ] && what="1 GiB download by curl inside the sandbox through the egress path, incl. start"
	r=$(med egress BenchmarkEgressDownload/plain ratio)
	if [ -z "$r" ]; then
		row "$what" "$(why egress)" "" "≥ 0.9× host curl" "—"
	else
		rc=$(med egress BenchmarkEgressDownload/connect ratio)
		cpu=$(med egress BenchmarkEgressDownload/plain cpu-ratio)
		box=$(med egress BenchmarkEgressDownload/plain box-MB/s)
		host=$(med egress BenchmarkEgressDownload/plain host-MB/s)
		now="$(f 2 "$r")× of host curl (HTTP proxy), ${rc:+$(f 2 "$rc")× (CONNECT)}; $(f 0 "$box") MB/s; CPU ratio $(f 2 "$cpu")"
		met=$(yesno le 0.9 "$r")
		if [ -n "$rc" ] && ! le 0.9 "$rc"; then met="**no**"; fi
		row "$what" "$now" "host curl $(f 0 "$host") MB/s on loopback" "≥ 0.9×" "$met"
	fi

	# The gateway's overhead on a small call.
	what="gateway overhead on a small tool call over stdio (\`mcpbox run\` vs the server directly)"
	o50=$(med gateway BenchmarkGatewayCall overhead-p50-µs)
	if [ -z "$o50" ]; then
		row "$what" "$(why gateway)" "" "+≤ 80 µs p50, +≤ 500 µs p99" "—"
	else
		o99=$(med gateway BenchmarkGatewayCall overhead-p99-µs)
		d50=$(med gateway BenchmarkGatewayCall direct-p50-µs)
		d99=$(med gateway BenchmarkGatewayCall direct-p99-µs)
		cpu=$(med gateway BenchmarkGatewayCall gw-cpu-µs/call)
		met=$(yesno le "$o50" 80)
		if ! le "$o99" 500; then met="**no**"; fi
		# The floor: the same server behind a relay that only copies bytes.
		l50=$(med gateway BenchmarkGatewayCall relay-overhead-p50-µs)
		floor="a bare relay process (C; poll, read, write): not measured (no C compiler)"
		if [ -n "$l50" ]; then
			floor="a bare relay process (C; poll, read, write) $(sf 0 "$l50") µs p50, $(sf 0 "$(med gateway BenchmarkGatewayCall relay-overhead-p99-µs)") µs p99, CPU $(f 0 "$(med gateway BenchmarkGatewayCall relay-cpu-µs/call)") µs/call"
		fi
		x=$(med gateway BenchmarkGatewayCall x-relay-p50)
		if [ -n "$x" ]; then x="; $(f 2 "$x")× the bare relay's overhead at p50"; fi
		row "$what" "$(sf 0 "$o50") µs p50, $(sf 0 "$o99") µs p99; gateway CPU $(f 0 "$cpu") µs/call$x" \
			"direct $(f 0 "$d50") µs p50, $(f 0 "$d99") µs p99; $floor" "+≤ 80 µs p50, +≤ 500 µs p99" "$met"
	fi

	# Memory of idle and paused sandboxes' helpers, side by side.
	k=$(med memory BenchmarkIdleMemory/sandbox sandboxes)
	bwbase="bubblewrap: not measured"
	if [ -n "$bw_mem" ]; then
		bwbase="bubblewrap's processes USS ${bw_mem% *}, PSS ${bw_mem#* } MiB each ($idle_sandboxes side by side)"
	fi
	# The row's figure is mcpbox as installed (with mcpbox-init) when the
	# density run measured it; the library's, with the test binary as the
	# init, follows it (or stands alone).
	dk=$(med density BenchmarkIdleMemoryBinaries sandboxes)
	for st in idle paused; do
		what="$st sandbox, private memory (USS) of its helper processes, $idle_sandboxes side by side"
		uss=$(med memory BenchmarkIdleMemory/sandbox "$st-USS-MiB/sandbox")
		luss=$(med density BenchmarkIdleMemoryBinaries "lean-$st-USS-MiB/sandbox")
		if [ -z "$uss" ] && [ -z "$luss" ]; then
			row "$what" "$(why memory)" "$bwbase" "≤ 1.5 MiB each" "—"
			continue
		fi
		now="" lib=""
		if [ -n "$uss" ]; then
			pss=$(med memory BenchmarkIdleMemory/sandbox "$st-PSS-MiB/sandbox")
			lib="USS $(f 2 "$uss") MiB, PSS $(f 2 "$pss") MiB each ($(f 0 "$k") sandboxes)"
		fi
		if [ -n "$luss" ]; then
			lpss=$(med density BenchmarkIdleMemoryBinaries "lean-$st-PSS-MiB/sandbox")
			now="USS $(f 2 "$luss") MiB, PSS $(f 2 "$lpss") MiB each ($(f 0 "$dk") sandboxes of \`mcpbox exec\` with mcpbox-init)"
			[ -n "$lib" ] && now="$now; the library with the test binary as the init: $lib"
			met=$(yesno le "$luss" 1.5)
		else
			now=$lib
			met=$(yesno le "$uss" 1.5)
		fi
		row "$what" "$now" "$bwbase" "≤ 1.5 MiB each" "$met"
	done

	# Waking a paused sandbox.
	what="wake from pause (resume, then a ping answered)"
	w50=$(med wake BenchmarkWake wake-p50-µs)
	if [ -z "$w50" ]; then
		row "$what" "$(why wake)" "" "— (none in the issue)" "—"
	else
		w99=$(med wake BenchmarkWake wake-p99-µs)
		r50=$(med wake BenchmarkWake running-p50-µs)
		row "$what" "$(f 0 "$w50") µs p50, $(f 0 "$w99") µs p99" "a ping to the running server $(f 0 "$r50") µs p50" \
			"— (none in the issue)" "—"
	fi

	# A start from the warm pool.
	what="warm-pool start (/bin/true, all layers and limits, to a running workload)"
	ws=$(med warm BenchmarkWarmStart/pool=true start-ms)
	if [ -z "$ws" ]; then
		row "$what" "$(why warm)" "" "≤ 2 ms" "—"
	else
		cs=$(med warm BenchmarkWarmStart/pool=false start-ms)
		rt=$(med warm BenchmarkWarmStart/pool=true ratio-to-cold)
		row "$what" "$(f 1 "$ws") ms (${rt:+$(f 2 "$rt")× cold})" "cold start $(f 1 "$cs") ms (same spec)" "≤ 2 ms" "$(yesno le "$ws" 2)"
	fi
	echo
	pu=$(med memory BenchmarkIdleMemory/prepared USS-MiB/prepared)
	if [ -n "$pu" ]; then
		echo "Warm pool cost: USS $(f 2 "$pu") MiB, PSS $(f 2 "$(med memory BenchmarkIdleMemory/prepared PSS-MiB/prepared)") MiB" \
			"per prepared sandbox ($idle_sandboxes side by side)."
	fi
	gu=$(med memory BenchmarkIdleMemory/gateway USS-MiB/instance)
	if [ -n "$gu" ]; then
		echo "Gateway (\`mcpbox run\`) per instance: USS $(f 2 "$gu") MiB, PSS $(f 2 "$(med memory BenchmarkIdleMemory/gateway PSS-MiB/instance)") MiB."
	fi
	wl=$(med memory BenchmarkIdleMemory/sandbox workload-PSS-MiB/sandbox)
	if [ -n "$wl" ]; then
		echo "The idle workload itself (the test MCP server): PSS $(f 2 "$wl") MiB per sandbox, not counted above."
	fi
	first="The first two rows are the library's Run with mcpbox-init, the lean init, as the sandbox init (and, second, the test binary re-executed instead)"
	[ $lean_exec = 1 ] || first="The first two rows are the library's Run with the test binary as the sandbox init"
	echo "$first; the CLI rows are" \
		"\`mcpbox exec\` with mcpbox-init next to it (built together from a clean clone of HEAD) and, second, the same" \
		"mcpbox alone, re-executing itself as the init. Plain and bwrap are started in turn in every round of each."
} >"$out/table.md"

echo >&2
cat "$out/table.md"
if [ ${#failed[@]} -gt 0 ]; then
	echo "bench.sh: failed: ${failed[*]}" >&2
	exit 1
fi
