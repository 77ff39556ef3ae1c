package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nestedAttack runs from inside the workload: it reports its user
// namespace and capabilities, then tries to undo the read-only
// /workspace/input every way a process with capabilities over the
// sandbox's mount namespace could, and to join the init's namespaces.
const nestedAttack = `
echo "userns: $(readlink /proc/self/ns/user)"
echo "uid_map: $(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')"
grep '^Cap' /proc/self/status | tr -d '\t' | tr ':' ' '
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name: allowed"; else echo "$name: denied"; fi; }
try write touch /workspace/input/probe
try umount umount /workspace/input
try lazy-umount umount -l /workspace/input
try bind mount --bind /tmp /workspace/input
try remount mount -o remount,bind,rw /workspace/input
try unshare-U unshare -Ur true
try unshare-m unshare -m sh -c 'mount -o remount,bind,rw /workspace/input && touch /workspace/input/probe'
try unshare-Urm unshare -Urm sh -c 'mount -o remount,bind,rw /workspace/input && touch /workspace/input/probe'
try unshare-Urm-root unshare -Urm sh -c 'mount -o remount,bind,rw / && touch /probe'
try setns-mnt nsenter -t 1 -m true
try setns-user nsenter -t 1 -U true
read line || true
`

// TestWorkloadNestedUserns: the workload runs in a user namespace of its
// own, a child of the init's, with no capabilities, and cannot undo a
// read-only mount: with every wall up, and again with seccomp and Landlock
// down, so that the user namespace is shown to hold by itself (a copy of
// the sandbox's mount namespace made in a namespace of its own has its
// mounts locked).
func TestWorkloadNestedUserns(t *testing.T) {
	requireSandbox(t)
	for _, walls := range []string{"all walls", "userns alone"} {
		t.Run(walls, func(t *testing.T) {
			if walls == "userns alone" {
				testHookWorkload = func(c *workloadConfig) { c.Seccomp, c.NoLandlock = nil, true }
				t.Cleanup(func() { testHookWorkload = nil })
			}
			input := t.TempDir()
			spec := quick("sh", "-c", nestedAttack)
			spec.Input = input
			got, initNS := runHeld(t, spec)
			want := map[string]string{
				"uid_map": strconv.Itoa(sandboxUID) + " " + strconv.Itoa(sandboxUID) + " 1",
				"CapInh":  "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
				"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			}
			// With the other walls down, the workload may make user
			// namespaces: the denials below are the nested namespace's.
			want["unshare-U"] = map[string]string{"all walls": "denied", "userns alone": "allowed"}[walls]
			for _, a := range []string{"write", "umount", "lazy-umount", "bind", "remount", "unshare-m", "unshare-Urm", "unshare-Urm-root", "setns-mnt", "setns-user"} {
				want[a] = "denied"
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
			if got["userns"] == "" || got["userns"] == initNS {
				t.Errorf("workload's user namespace %q, init's %q: want a namespace of its own", got["userns"], initNS)
			}
			if ents, err := os.ReadDir(input); err != nil || len(ents) != 0 {
				t.Errorf("input dir after the run: %v, %v; want it empty", ents, err)
			}
		})
	}
}

// runHeld starts spec, whose script ends by reading a line from stdin,
// reads the init's user namespace while the workload waits, then lets it
// finish. It returns the "key: value" lines the workload printed and the
// init's namespace.
func runHeld(t *testing.T, spec Spec) (map[string]string, string) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := Start(ctx, spec, Stdio{Stdin: inR, Stdout: outW, Stderr: outW})
	outW.Close()
	if err != nil {
		b, _ := io.ReadAll(outR)
		t.Fatalf("%v; output:\n%s", err, b)
	}
	initNS, err := os.Readlink("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/ns/user")
	if err != nil {
		t.Fatalf("reading the init's user namespace: %v", err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		if strings.HasPrefix(k, "Cap") {
			k, v, _ = strings.Cut(k, " ")
		}
		got[k] = v
		if k == "setns-user" {
			break
		}
	}
	inW.Close()
	_, _ = io.Copy(io.Discard, outR)
	res, err := sb.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox: %v, %+v; output %v", err, res, got)
	}
	return got, initNS
}

// forkBomb forks as many children as it may, up to 100, and reports how
// many it got and how many the kernel refused.
const forkBomb = `import os, time
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
print("refused:", refused)
for pid in kids:
    os.kill(pid, 9)
`

// TestPidsLimitWithoutCgroups: with cgroups degraded (unprivileged, no
// delegation), --pids still stops a fork bomb, through RLIMIT_NPROC in the
// workload's own user namespace, and the host can still fork. As root it
// runs itself as uid 65534, where this host has no cgroups to give.
func TestPidsLimitWithoutCgroups(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to fork with")
	}
	if os.Geteuid() == 0 {
		runUnprivileged(t, "TestPidsLimitWithoutCgroups")
		return
	}
	const pids = 20
	spec := quick("python3", "-c", forkBomb)
	spec.Limits.Pids = pids
	var out, errb bytes.Buffer
	sb, err := Start(context.Background(), spec, Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("fork bomb: %v, %+v\nstdout %s\nstderr %s", err, res, out.String(), errb.String())
	}
	if !hasLayer(sb.Degraded, LayerCgroups) {
		t.Skip("this user has cgroups: the limit is the cgroup's, tested elsewhere")
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		got[k], _ = strconv.Atoi(v)
	}
	t.Logf("--pids %d without cgroups: %v", pids, got)
	// The bomb itself is one of the pids.
	if got["forked"] > pids-1 || got["forked"] < pids-3 || got["refused"] != 100-got["forked"] {
		t.Fatalf("under --pids %d without cgroups the bomb got %d children (%d refused), want about %d\n%s",
			pids, got["forked"], got["refused"], pids-1, out.String())
	}
	// Counted in the sandbox's own user namespace: the host user was not
	// charged.
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Fatalf("the host cannot fork after the bomb: %v", err)
	}
}
