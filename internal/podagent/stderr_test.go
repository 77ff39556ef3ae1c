package podagent

import (
	"bytes"
	"testing"
)

// TestRedactWriter: a value written a byte at a time is redacted; a
// value's beginning that turns out not to be one is written, at the
// latest when the stream ends; short values are left alone.
func TestRedactWriter(t *testing.T) {
	var out bytes.Buffer
	rw := newRedactWriter(&out, StartRequest{Env: map[string]string{"A": "s3cr3t-value-42", "B": "short", "C": "s3cr3t-value-42-and-more"}})
	in := "x s3cr3t-value-42-and-more y s3cr3t-value-42 z short s3cr3t-val"
	for i := range len(in) {
		if _, err := rw.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.Contains(out.Bytes(), []byte("s3cr3t-val")) {
		t.Fatalf("a value's beginning was written before it was known not to be one: %q", out.String())
	}
	rw.Close()
	if want := "x [REDACTED:C] y [REDACTED:A] z short s3cr3t-val"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if newRedactWriter(&out, StartRequest{Env: map[string]string{"B": "short"}}) != nil {
		t.Error("a redactor for nothing worth redacting")
	}
}
