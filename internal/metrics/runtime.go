package metrics

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The Go runtime's and the process's metrics, by the names and meanings
// of client_golang's Go and process collectors (go_*, process_*), which
// dashboards and alerts written for any Go service expect.

// goFamilies reads the Go runtime's metrics.
func goFamilies() []*family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads, _ := runtime.ThreadCreateProfile(nil)
	fams := []*family{
		gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		gauge("go_threads", "Number of OS threads created.", float64(threads)),
		gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously.", float64(runtime.GOMAXPROCS(0))),
		gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", float64(debug.SetMemoryLimit(-1))),
	}
	info := &family{name: "go_info", help: "Information about the Go environment.", typ: typeGauge}
	info.add("", 1, label{"version", runtime.Version()})
	fams = append(fams, info)

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	pauses := &family{name: "go_gc_duration_seconds", help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", typ: typeSummary}
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		pauses.add("", gc.PauseQuantiles[i].Seconds(), label{"quantile", q})
	}
	pauses.add("_sum", gc.PauseTotal.Seconds())
	pauses.add("_count", float64(gc.NumGC))
	fams = append(fams, pauses)

	for _, m := range []struct {
		name, help string
		counter    bool
		v          uint64
	}{
		{"alloc_bytes", "Number of heap bytes allocated and currently in use.", false, ms.Alloc},
		{"alloc_bytes_total", "Total number of heap bytes allocated, even if freed.", true, ms.TotalAlloc},
		{"buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table.", false, ms.BuckHashSys},
		{"frees_total", "Total number of heap objects frees.", true, ms.Frees},
		{"gc_sys_bytes", "Number of bytes used for garbage collection system metadata.", false, ms.GCSys},
		{"heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", false, ms.HeapAlloc},
		{"heap_idle_bytes", "Number of heap bytes waiting to be used.", false, ms.HeapIdle},
		{"heap_inuse_bytes", "Number of heap bytes that are in use.", false, ms.HeapInuse},
		{"heap_objects", "Number of currently allocated objects.", false, ms.HeapObjects},
		{"heap_released_bytes", "Number of heap bytes released to OS.", false, ms.HeapReleased},
		{"heap_sys_bytes", "Number of heap bytes obtained from system.", false, ms.HeapSys},
		{"mallocs_total", "Total number of heap objects allocated, both live and gc-ed.", true, ms.Mallocs},
		{"mcache_inuse_bytes", "Number of bytes in use by mcache structures.", false, ms.MCacheInuse},
		{"mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system.", false, ms.MCacheSys},
		{"mspan_inuse_bytes", "Number of bytes in use by mspan structures.", false, ms.MSpanInuse},
		{"mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system.", false, ms.MSpanSys},
		{"next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", false, ms.NextGC},
		{"other_sys_bytes", "Number of bytes used for other system allocations.", false, ms.OtherSys},
		{"stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", false, ms.StackInuse},
		{"stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", false, ms.StackSys},
		{"sys_bytes", "Number of bytes obtained from system.", false, ms.Sys},
	} {
		f := gauge("go_memstats_"+m.name, m.help, float64(m.v))
		if m.counter {
			f.typ = typeCounter
		}
		fams = append(fams, f)
	}
	fams = append(fams, gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC)/1e9))
	return fams
}

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// processFamilies reads the process's metrics from /proc; what cannot be
// read is left out.
func processFamilies() []*family {
	var fams []*family
	if st, err := readStat("/proc/self/stat"); err == nil {
		cpu := gauge("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", float64(st.utime+st.stime)/userHZ)
		cpu.typ = typeCounter
		fams = append(fams, cpu,
			gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize)),
			gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss*int64(os.Getpagesize()))))
		if boot, err := bootTime(); err == nil {
			fams = append(fams, gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+float64(st.starttime)/userHZ))
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		fams = append(fams, gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds))))
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		fams = append(fams, gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur)))
	}
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) == nil {
		fams = append(fams, gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur)))
	}
	return fams
}

// procStat holds the fields of /proc/PID/stat the metrics use.
type procStat struct {
	utime, stime, starttime uint64 // in USER_HZ
	vsize                   uint64 // bytes
	rss                     int64  // pages
}

// readStat parses /proc/PID/stat (proc(5)): the fields after the
// command, which is in parentheses and may itself hold spaces and ")".
func readStat(path string) (procStat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(data))
}

func parseStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, strconv.ErrSyntax
	}
	// f[0] is field 3 (state): field n is f[n-3].
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, strconv.ErrSyntax
	}
	var st procStat
	var errs [5]error
	st.utime, errs[0] = strconv.ParseUint(f[14-3], 10, 64)
	st.stime, errs[1] = strconv.ParseUint(f[15-3], 10, 64)
	st.starttime, errs[2] = strconv.ParseUint(f[22-3], 10, 64)
	st.vsize, errs[3] = strconv.ParseUint(f[23-3], 10, 64)
	st.rss, errs[4] = strconv.ParseInt(f[24-3], 10, 64)
	for _, err := range errs {
		if err != nil {
			return procStat{}, err
		}
	}
	return st, nil
}

// bootTime is the btime line of /proc/stat: the boot time in seconds
// since the epoch.
func bootTime() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, strconv.ErrSyntax
}
