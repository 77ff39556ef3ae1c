package nofile_test

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"mcpbox/internal/nofile"
)

const childEnv = "MCPBOX_NOFILE_TEST_SOFT"

// TestStartIsBeforeGoRaisedIt: started with a soft limit below the hard
// one, the process finds in Start the limit it started with, while Go
// has raised its own: this package's initialiser ran before syscall's.
// It runs itself again under a lowered soft limit. (An external test
// package: one inside would import syscall, and start after it.)
func TestStartIsBeforeGoRaisedIt(t *testing.T) {
	if want := os.Getenv(childEnv); want != "" {
		var now syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
			t.Fatal(err)
		}
		soft, hard, ok := nofile.Start()
		if !ok || strconv.FormatUint(soft, 10) != want || hard != now.Max || now.Cur == soft {
			t.Fatalf("Start() = %d, %d, %v with the limit now %d, %d: want the soft limit %s this process started with, below Go's",
				soft, hard, ok, now.Cur, now.Max, want)
		}
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	const soft = 200
	if lim.Max < soft+2 {
		t.Skipf("hard limit on open files %d: no room below it", lim.Max)
	}
	cmd := exec.Command("/bin/sh", "-c", `ulimit -Sn `+strconv.Itoa(soft)+` && exec "$0" -test.run '^TestStartIsBeforeGoRaisedIt$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(soft))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
