package integrity

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// checkLockRoundTrip: a lock that parsed is written, read back equal, and
// written again byte for byte the same.
func checkLockRoundTrip(t *testing.T, l *Lock) []byte {
	t.Helper()
	out, err := l.Marshal()
	if err != nil {
		t.Fatalf("Marshal of a lock that parsed: %v", err)
	}
	back, err := parseLock(out)
	if err != nil {
		t.Fatalf("the written lock does not parse: %v\n%s", err, out)
	}
	if diff := cmp.Diff(l, back); diff != "" {
		t.Fatalf("lock changed through a write and read (-before +after):\n%s", diff)
	}
	again, err := back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Fatalf("a re-written lock is not byte-stable:\n%s\n---\n%s", out, again)
	}
	return out
}

// FuzzLock parses arbitrary lock files. A refused file gives an error and
// no lock; an accepted one round-trips byte-stably, and its written form is
// the canonical one (writing the written form changes nothing).
func FuzzLock(f *testing.F) {
	for _, l := range []*Lock{
		{Servers: map[string]*ServerLock{}},
		sampleLock(f, `{"name":"read","description":"Reads <a> & b.","inputSchema":{"type":"object"}}`),
		sampleLock(f, `{"name":"café","annotations":{"w":0.5}}`, `{"name":"b","inputSchema":{"properties":{"n":{"maximum":1e2}}}}`),
		{Servers: map[string]*ServerLock{"s": {Prompts: map[string]Pin{"p": mustPin(f, KindPrompt, `{"name":"p","arguments":[{"name":"a"}]}`)}, Templates: map[string]Pin{}}}},
	} {
		b, err := l.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"servers":{"a":{}}}`))
	f.Add([]byte(`{"version":1,"servers":{},"servers":{}}`))
	f.Add([]byte(`{"version":2,"servers":{}}`))
	f.Add([]byte(`{"version":1,"servers":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseLock(data)
		if err != nil {
			if l != nil {
				t.Fatalf("refused lock (%v) returned a lock", err)
			}
			return
		}
		checkLockRoundTrip(t, l)
	})
}

// FuzzLockPin pins an arbitrary definition under the name it carries and
// checks that the lock holding it round-trips byte-stably.
func FuzzLockPin(f *testing.F) {
	for _, d := range []string{
		`{"name":"read","description":"Reads <a> & b.","inputSchema":{"type":"object"}}`,
		`{"name":"x","annotations":{"w":5E-1},"_meta":{"t":1}}`,
		`{"name":"\u2028\ud83d\ude00","arguments":[{"name":"a","required":true}]}`,
		`{"uriTemplate":"file:///{p}","name":"t"}`,
		`{"name":"n","inputSchema":{"properties":{"a":{"default":-0.0,"maximum":1e308}}}}`,
	} {
		for k := range uint8(3) {
			f.Add(k, "srv", []byte(d))
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, server string, def []byte) {
		if !utf8.ValidString(server) {
			return // server names come from the config, which allows [a-z0-9_-]
		}
		kind := pinKinds[int(k)%len(pinKinds)]
		pin, key, err := newPinKey(kind, def)
		if err != nil {
			return
		}
		if !json.Valid(pin.Definition) {
			t.Fatalf("pinned definition is not JSON: %q", pin.Definition)
		}
		l := &Lock{}
		l.server(server).setPins(kind, map[string]Pin{key: pin})
		checkLockRoundTrip(t, l)
	})
}
