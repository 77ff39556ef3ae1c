package redact

import (
	"strings"
	"sync"
	"testing"
)

func TestBook(t *testing.T) {
	var b Book
	if got := b.String("nothing known yet"); got != "nothing known yet" {
		t.Fatalf("empty book changed %q", got)
	}
	if err := b.Add("TOKEN", []byte("first-value-123")); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("TOKEN", []byte("rotated-value-456")); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("TOKEN", []byte("first-value-123")); err != nil { // known: no-op
		t.Fatal(err)
	}
	got := b.String("a first-value-123 b rotated-value-456 c")
	if want := "a [REDACTED:TOKEN] b [REDACTED:TOKEN] c"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if err := b.Add("SHORT", []byte("abc")); err == nil {
		t.Fatal("a short value was accepted")
	}
	if got := b.String("rotated-value-456"); got != "[REDACTED:TOKEN]" {
		t.Fatalf("a refused Add broke the book: %q", got)
	}
}

func TestBookConcurrent(t *testing.T) {
	var b Book
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := strings.Repeat(string(rune('a'+i)), 12)
			if err := b.Add("S", []byte(v)); err != nil {
				t.Error(err)
			}
			if got := b.String(v); got != "[REDACTED:S]" {
				t.Errorf("%q not redacted right after Add: %q", v, got)
			}
		})
	}
	wg.Wait()
}

// TestBookCountsRedactions: each piece of text in which a value was
// replaced counts once; text without one does not.
func TestBookCountsRedactions(t *testing.T) {
	var b Book
	if err := b.Add("tok", []byte("s3cr3t-token-value")); err != nil {
		t.Fatal(err)
	}
	b.String("nothing here")
	b.Bytes([]byte("nor here"))
	b.JSON([]byte(`{"a":"clean"}`))
	if n := b.Redactions(); n != 0 {
		t.Fatalf("%d redactions counted for clean text", n)
	}
	b.String("x s3cr3t-token-value y s3cr3t-token-value")
	b.Bytes([]byte("s3cr3t-token-value"))
	b.JSON([]byte(`{"a":"s3cr3t-token-value"}`))
	if n := b.Redactions(); n != 3 {
		t.Fatalf("%d redactions, want 3 (one per piece of text)", n)
	}
}

// TestBookSharedValue: one value feeding two servers' secrets (server a's
// GITHUB_TOKEN, server b's GH_PAT) is labelled neutrally, in whichever
// order they were added: server b's output must not name server a's
// secret. Its other values keep their names.
func TestBookSharedValue(t *testing.T) {
	for _, order := range [][2]string{{"GITHUB_TOKEN", "GH_PAT"}, {"GH_PAT", "GITHUB_TOKEN"}} {
		var b Book
		for _, name := range order {
			if err := b.Add(name, []byte("ghp_shared-value-123")); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Add("OTHER", []byte("other-value-456")); err != nil {
			t.Fatal(err)
		}
		if err := b.Add(order[0], []byte("ghp_shared-value-123")); err != nil { // again: still shared
			t.Fatal(err)
		}
		got := b.String("b says ghp_shared-value-123 and other-value-456")
		if want := "b says [REDACTED:" + SharedName + "] and [REDACTED:OTHER]"; got != want {
			t.Errorf("added as %v: got %q, want %q", order, got, want)
		}
	}
}
