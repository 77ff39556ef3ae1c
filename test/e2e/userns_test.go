package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// TestWorkloadOwnUserNamespace: the built binary runs the workload in a
// user namespace nested in the init's (its uid_map maps uid 1000 to the
// parent's 1000, not to a host uid), with no capabilities, and the
// read-only input stays read-only however the workload tries to remount,
// unmount or re-enter the init's namespaces.
func TestWorkloadOwnUserNamespace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		r := m.sh(t, `echo "uid_map: $(tr -s ' ' < /proc/self/uid_map | sed 's/^ //')"
grep '^CapEff' /proc/self/status | tr -d '\t' | sed 's/:/: /'
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name: allowed"; else echo "$name: denied"; fi; }
try umount umount /workspace/input
try remount mount -o remount,bind,rw /workspace/input
try unshare unshare -Urm sh -c 'mount -o remount,bind,rw /workspace/input'
try setns nsenter -t 1 -m -U true
try write touch /workspace/input/probe`, "--input", in)
		want(t, r, 0, "uid_map: 1000 1000 1\n", "CapEff: 0000000000000000\n",
			"umount: denied", "remount: denied", "unshare: denied", "setns: denied", "write: denied")
	})
}

// TestForkBombWithoutCgroups: unprivileged without delegated cgroups
// (--allow-degraded=cgroups), --pids still holds, through RLIMIT_NPROC in
// the workload's own user namespace.
func TestForkBombWithoutCgroups(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if len(m.flags) == 0 {
			t.Skip("this mode has cgroups: TestForkBomb")
		}
		const pids = 20
		r := m.exec(t, "", "--pids", strconv.Itoa(pids), "--timeout", "30s", "--", "python3", "-c", `import os, time
kids, refused = [], 0
for i in range(100):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print("forked:", len(kids))
for pid in kids:
    os.kill(pid, 9)`)
		if r.code != 0 {
			t.Fatalf("fork bomb:\n%s", r)
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.stdout), "forked:")))
		if err != nil {
			t.Fatalf("no count from the bomb:\n%s", r)
		}
		// The bomb itself is one of the pids.
		if n > pids-1 || n < pids-3 {
			t.Fatalf("under --pids %d without cgroups the bomb got %d children, want about %d\n%s", pids, n, pids-1, r)
		}
		t.Logf("--pids %d without cgroups: the bomb got %d children", pids, n)
	})
}
