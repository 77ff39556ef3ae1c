package sandbox

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// handOverOwnSocket is a workload that hands the proxy a TCP socket of its
// own over the proxy socket, as the init does with those it accepts, and
// keeps its copy: it clears O_NONBLOCK on the shared file description and
// sends one byte, so that a proxy serving the socket blocks in read(2).
const handOverOwnSocket = `import fcntl, os, socket, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
d = socket.create_connection(l.getsockname()); a, _ = l.accept()
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.connect("/run/mcpbox/egress.sock")
socket.send_fds(u, [b"\x00FD1 \n"], [a.fileno()])
end = time.time() + 0.3
while time.time() < end:
    fcntl.fcntl(a.fileno(), fcntl.F_SETFL, fcntl.fcntl(a.fileno(), fcntl.F_GETFL) & ~os.O_NONBLOCK)
    time.sleep(0.001)
d.send(b"G")
print("handed over", flush=True)
time.sleep(30)
`

// The workload reaches the proxy socket too, but only the init may hand a
// connection over: the workload's own socket is refused before the proxy
// takes it in, so it cannot hold a session (and an OS thread, and the
// proxy's Close) past every deadline.
func TestWorkloadHandOverRefused(t *testing.T) {
	requireSandbox(t)
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no python3 to pass a descriptor with")
	}
	events := make(chan egress.Event, 16)
	spec := quick(python, "-c", handOverOwnSocket)
	spec.Network = Network{
		Rules:  []egress.Rule{{Host: "127.0.0.1", Ports: []int{1}}},
		Limits: egress.Limits{HeaderTimeout: time.Second},
		Log: func(ev egress.Event) {
			select {
			case events <- ev:
			default:
			}
		},
	}
	var out syncBuffer
	sb, err := Start(context.Background(), spec, Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	wait := sync.OnceValues(sb.Wait)
	t.Cleanup(func() {
		sb.Kill()
		if _, err := waitWithin(wait, 20*time.Second); err != nil {
			t.Error(err)
		}
	})
	select {
	case ev := <-events:
		if ev.Decision != "deny" || !strings.Contains(ev.Reason, "not from the sandbox's init") {
			t.Fatalf("event %+v, want the workload's hand-over refused (workload: %q)", ev, out.String())
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("no egress event within 8 s: the workload's own socket holds a session past its 1 s head timeout (workload: %q)", out.String())
	}
	if n := sb.proxy.ActiveConns(); n != 0 {
		t.Errorf("%d proxy connections still active", n)
	}
}
