package redact

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
)

// Book is the set of secret values a process knows, growing as secrets are
// resolved (and re-resolved when they rotate: old values stay, since a
// server may still print them). It keeps a Redactor for the current set;
// it is safe for concurrent use.
type Book struct {
	mu      sync.Mutex
	secrets []Secret
	r       atomic.Pointer[Redactor]
	n       atomic.Int64 // pieces of text Bytes, String and JSON changed
}

// Redactions is the number of pieces of text (messages, lines, strings)
// in which Bytes, String or JSON replaced at least one value.
func (b *Book) Redactions() int64 { return b.n.Load() }

// count notes a redaction when out differs from in.
func (b *Book) count(changed bool) {
	if changed {
		b.n.Add(1)
	}
}

// SharedName is the label of a value that was added under more than one
// name: one book serves every server of a gateway, and a server's output
// must not be labelled with a secret name of another server's that
// happens to hold the same value.
const SharedName = "shared_secret"

// Add records a value; adding a known value again under its name does
// nothing, under another name relabels it SharedName.
func (b *Book) Add(name string, value []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var next []Secret
	for i, s := range b.secrets {
		if !bytes.Equal(s.Value, value) {
			continue
		}
		if s.Name == name || s.Name == SharedName {
			return nil
		}
		next = slices.Clone(b.secrets)
		next[i].Name = SharedName
		break
	}
	if next == nil {
		next = append(b.secrets[:len(b.secrets):len(b.secrets)], Secret{Name: name, Value: bytes.Clone(value)})
	}
	r, err := New(next)
	if err != nil {
		return err
	}
	b.secrets = next
	b.r.Store(r)
	return nil
}

// Redactor returns the redactor for the values recorded so far, or nil
// when there are none.
func (b *Book) Redactor() *Redactor {
	return b.r.Load()
}

// Bytes redacts p with the current values; p itself when none are known.
func (b *Book) Bytes(p []byte) []byte {
	if r := b.r.Load(); r != nil {
		out := r.Bytes(p)
		b.count(!bytes.Equal(out, p))
		return out
	}
	return p
}

// Folded is Redactor.Folded with the current values; s itself when none
// are known.
func (b *Book) Folded(s string) string {
	if r := b.r.Load(); r != nil {
		out := r.Folded(s)
		b.count(out != s)
		return out
	}
	return s
}

// Host is Redactor.Host with the current values; s itself when none are
// known.
func (b *Book) Host(s string) string {
	if r := b.r.Load(); r != nil {
		out := r.Host(s)
		b.count(out != s)
		return out
	}
	return s
}

// String is Bytes for strings.
func (b *Book) String(s string) string {
	if r := b.r.Load(); r != nil {
		out := r.String(s)
		b.count(out != s)
		return out
	}
	return s
}
