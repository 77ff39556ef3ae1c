package podagent

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestBacklogBounded: what waits for an event stream is bounded in count
// and bytes, the newest kept.
func TestBacklogBounded(t *testing.T) {
	var logged int
	b := newBridge(nil, 1000, func(string, ...any) { logged++ })
	for i := range 3 * maxBacklog {
		b.emit([]byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	if len(b.backlog) > maxBacklog || b.backBytes > 2*b.max || logged == 0 {
		t.Fatalf("backlog of %d messages, %d bytes (limit %d), %d drops logged", len(b.backlog), b.backBytes, 2*b.max, logged)
	}
	if last := string(b.backlog[len(b.backlog)-1]); last != fmt.Sprintf(`{"n":%d}`, 3*maxBacklog-1) {
		t.Errorf("the newest message was dropped; last kept %s", last)
	}
	sum := 0
	for _, m := range b.backlog {
		sum += len(m)
	}
	if sum != b.backBytes {
		t.Errorf("backBytes %d, the backlog holds %d", b.backBytes, sum)
	}
}

// FuzzScanEvents checks the event stream reader against a naive one on
// streams the agent writes: each message comes back whole and in order.
func FuzzScanEvents(f *testing.F) {
	f.Add("a\x00b\x00{\"x\":1}")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		var msgs []string
		for _, m := range strings.Split(in, "\x00") {
			if m = strings.NewReplacer("\r", "", "\n", "").Replace(m); m != "" {
				msgs = append(msgs, m)
			}
		}
		var buf bytes.Buffer
		for _, m := range msgs {
			buf.WriteString("event: message\ndata: " + m + "\n\n")
			buf.WriteString(": comment\n")
		}
		var got []string
		err := scanEvents(&buf, 1<<20, func(d []byte) error { got = append(got, string(d)); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(msgs) {
			t.Fatalf("got %d events, want %d", len(got), len(msgs))
		}
		for i := range got {
			if got[i] != msgs[i] {
				t.Fatalf("event %d = %q, want %q", i, got[i], msgs[i])
			}
		}
	})
}

func TestScanEventsBounded(t *testing.T) {
	in := "data: " + strings.Repeat("x", 5000) + "\n\n"
	err := scanEvents(strings.NewReader(in), 1000, func([]byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an event over the limit: %v", err)
	}
	in = strings.Repeat("data: "+strings.Repeat("y", 600)+"\n", 3) + "\n"
	err = scanEvents(strings.NewReader(in), 1000, func([]byte) error { return nil })
	if err == nil {
		t.Error("an event of many data lines over the limit was read")
	}
}
