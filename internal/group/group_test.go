package group

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// run starts Supervise over pipes and returns a Mux on its other end.
func run(t *testing.T, members []Member) *Mux {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Supervise(members, inR, outW, io.Discard)
		outW.Close()
		done <- err
	}()
	m := NewMux(inW, outR)
	t.Cleanup(func() {
		m.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Supervise: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Supervise did not return after its stdin closed")
		}
		<-m.Done()
	})
	return m
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatalf("reading: %v", got.err)
		}
		return strings.TrimSuffix(got.s, "\n")
	case <-time.After(10 * time.Second):
		t.Fatal("no line")
	}
	return ""
}

func TestRouting(t *testing.T) {
	m := run(t, []Member{{Name: "a", Argv: []string{"cat"}}, {Name: "b", Argv: []string{"cat"}}})
	aIn, aOut, err := m.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	bIn, bOut, err := m.Start(1)
	if err != nil {
		t.Fatal(err)
	}
	ar, br := bufio.NewReader(aOut), bufio.NewReader(bOut)
	long := strings.Repeat("x", 200<<10) // longer than any buffer on the way
	for _, msg := range []string{`{"to":"a"}`, long} {
		io.WriteString(aIn, msg+"\n")
		if got := readLine(t, ar); got != msg {
			t.Fatalf("a echoed %.40q, want %.40q", got, msg)
		}
	}
	io.WriteString(bIn, `{"to":"b"}`+"\n")
	if got := readLine(t, br); got != `{"to":"b"}` {
		t.Fatalf("b echoed %q", got)
	}
	if _, err := aIn.Write([]byte("two\nlines\n")); err == nil {
		t.Fatal("a write of two lines was accepted")
	}
}

func TestExitAndRestart(t *testing.T) {
	m := run(t, []Member{{Name: "once", Argv: []string{"sh", "-c", "read x; echo got $x; exit 3"}}})
	for round := range 2 {
		in, out, err := m.Start(0)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, "hello\n")
		r := bufio.NewReader(out)
		if got := readLine(t, r); got != "got hello" {
			t.Fatalf("round %d: %q", round, got)
		}
		if _, err := r.ReadString('\n'); err != io.EOF {
			t.Fatalf("round %d: stdout did not end: %v", round, err)
		}
		if code, ok := m.Exit(0); !ok || code != 3 {
			t.Fatalf("round %d: exit %d %v, want 3", round, code, ok)
		}
	}
}

// WaitExit returns as the exit arrives, not after polling or its timeout;
// it times out while the member runs.
func TestWaitExit(t *testing.T) {
	m := run(t, []Member{{Name: "once", Argv: []string{"sh", "-c", "read x; exit 4"}}})
	in, _, err := m.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.WaitExit(0, 50*time.Millisecond); ok {
		t.Fatal("WaitExit reported an exit while the member runs")
	}
	start := time.Now()
	io.WriteString(in, "go\n")
	if code, ok := m.WaitExit(0, time.Minute); !ok || code != 4 {
		t.Fatalf("WaitExit = %d, %v; want 4, true", code, ok)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("WaitExit took %s", d)
	}
	// Once exited, it answers at once.
	if code, ok := m.WaitExit(0, 0); !ok || code != 4 {
		t.Fatalf("WaitExit after the exit = %d, %v", code, ok)
	}
	// A member never started has no exit to wait for.
	if _, ok := m.WaitExit(7, time.Minute); ok {
		t.Fatal("WaitExit reported an exit of a member never started")
	}
}

func TestStopKillsAStubbornMember(t *testing.T) {
	m := run(t, []Member{{Name: "stubborn", Argv: []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"}}})
	in, out, err := m.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	readLine(t, r)
	start := time.Now()
	in.Close()
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > stopGrace+5*time.Second {
		t.Fatalf("stop took %s", d)
	}
	if _, ok := m.Exit(0); !ok {
		t.Fatal("no exit reported")
	}
}

// TestSecretsStayWithTheirMember: a member sees its own secret variables
// and not the other members'.
func TestSecretsStayWithTheirMember(t *testing.T) {
	t.Setenv("MCPBOX_GROUP_SECRET_A", "value-a")
	t.Setenv("MCPBOX_GROUP_SECRET_B", "value-b")
	show := []string{"sh", "-c", `echo "A=$MCPBOX_GROUP_SECRET_A B=$MCPBOX_GROUP_SECRET_B X=$X"`}
	m := run(t, []Member{
		{Name: "a", Argv: show, Secrets: []string{"MCPBOX_GROUP_SECRET_A"}, Env: []string{"X=1"}},
		{Name: "b", Argv: show, Secrets: []string{"MCPBOX_GROUP_SECRET_B"}},
	})
	for i, want := range []string{"A=value-a B= X=1", "A= B=value-b X="} {
		_, out, err := m.Start(i)
		if err != nil {
			t.Fatal(err)
		}
		if got := readLine(t, bufio.NewReader(out)); got != want {
			t.Fatalf("member %d sees %q, want %q", i, got, want)
		}
	}
}

func TestBadCommand(t *testing.T) {
	m := run(t, []Member{{Name: "missing", Argv: []string{"/nonexistent/server"}}})
	_, out, err := m.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(out); err != nil {
		t.Fatal(err)
	}
	if code, ok := m.Exit(0); !ok || code != 127 {
		t.Fatalf("exit %d %v, want 127", code, ok)
	}
}

// TestStuckMemberEndsTheGroup: a member that stops reading cannot block
// the gateway's writes: the supervisor stops that member (or, failing
// that, the gateway gives the group up after WriteTimeout).
func TestStuckMemberEndsTheGroup(t *testing.T) {
	old, oldMember := WriteTimeout, memberWriteTimeout
	WriteTimeout, memberWriteTimeout = 500*time.Millisecond, 300*time.Millisecond
	defer func() { WriteTimeout, memberWriteTimeout = old, oldMember }()
	inR, inW, err := os.Pipe() // a real pipe: deadlines need one
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		Supervise([]Member{{Name: "stuck", Argv: []string{"sleep", "600"}}}, inR, outW, io.Discard)
		outW.Close()
		close(done)
	}()
	m := NewMux(inW, outR)
	defer func() {
		inW.Close()
		inR.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Supervise did not return")
		}
	}()
	in, out, err := m.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	big := append(bytes.Repeat([]byte("x"), 4<<20), '\n')
	start := time.Now()
	in.Write(big)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the write blocked for %s", d)
	}
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, out); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the member that stopped reading was not stopped")
	}
}
