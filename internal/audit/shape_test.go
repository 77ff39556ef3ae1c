package audit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestShape(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, ``},
		{`{"path":"/etc/passwd","n":42,"ok":true,"x":null}`,
			`{"n":"number","ok":"bool","path":{"string":11},"x":"null"}`},
		{`{"list":["secret",2],"empty":[]}`,
			`{"empty":{"array":0},"list":{"array":2,"of":{"string":6}}}`},
		{`"héllo"`, `{"string":6}`},
		{`{"a":{"b":{"c":{"d":{"e":"deep"}}}}}`, `{"a":{"b":{"c":{"d":"object"}}}}`},
		{`[[[[["x"]]]]]`, `{"array":1,"of":{"array":1,"of":{"array":1,"of":{"array":1,"of":{"array":1}}}}}`},
		{`{"a":1`, `{"invalid":6}`},
		{`{"a":1} {"b":2}`, `{"invalid":15}`},
	}
	for _, tt := range tests {
		if got := string(Shape(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Shape(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestShapeKeyLimit(t *testing.T) {
	m := map[string]int{}
	for i := range 100 {
		m[fmt.Sprintf("k%03d", i)] = i
	}
	in, _ := json.Marshal(m)
	var got map[string]any
	if err := json.Unmarshal(Shape(in), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 65 || got["k063"] != "number" || got["k064"] != nil {
		t.Fatalf("shape of 100 keys has %d entries: %v", len(got), got)
	}
	if more := got["…"].(map[string]any)["more_keys"]; more != float64(36) {
		t.Errorf("more_keys = %v, want 36", more)
	}
}

// TestShapeNoValues builds random arguments whose every value carries a
// marker and checks the marker never reaches the shape.
func TestShapeNoValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		args := randomValue(rng, 0)
		in, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		out := string(Shape(in))
		if strings.Contains(out, "VAL") || strings.Contains(out, "31337") {
			t.Fatalf("case %d: shape %s of %s holds a value", i, out, in)
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("case %d: shape %s is not JSON", i, out)
		}
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(6); {
	case k == 0 && depth < 6:
		m := map[string]any{}
		n := 5 // wide only at the top, or the tree explodes
		if depth == 0 {
			n = 80
		}
		for j := range rng.IntN(n) {
			m[fmt.Sprintf("key%d", j)] = randomValue(rng, depth+1)
		}
		return m
	case k == 1 && depth < 6:
		a := make([]any, rng.IntN(4))
		for j := range a {
			a[j] = randomValue(rng, depth+1)
		}
		return a
	case k == 2:
		return 31337 + rng.IntN(1000)
	case k == 3:
		return rng.IntN(2) == 0
	default:
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		return "VAL" + string(b)
	}
}

// FuzzShape checks that every string in a shape is a key of the input or
// a word of the shape vocabulary, and every number a size: no value can
// pass through.
func FuzzShape(f *testing.F) {
	for _, s := range []string{`{"a":"secret"}`, `[1,"x",{"k":[true,null]}]`, `"v"`, `{"a":`, `{"a":{"b":{"c":{"d":{"e":1}}}}}`} {
		f.Add(s)
	}
	vocab := map[string]bool{"number": true, "bool": true, "null": true, "object": true,
		"string": true, "array": true, "of": true, "invalid": true, "…": true, "more_keys": true}
	f.Fuzz(func(t *testing.T, in string) {
		out := Shape(json.RawMessage(in))
		if len(out) == 0 {
			return
		}
		var shape any
		if err := json.Unmarshal(out, &shape); err != nil {
			t.Fatalf("shape %s is not JSON: %v", out, err)
		}
		keys := map[string]bool{}
		var input any
		if json.Unmarshal([]byte(in), &input) == nil {
			collectKeys(input, keys)
		}
		walkShape(t, shape, func(s string) {
			if !vocab[s] && !keys[s] {
				t.Fatalf("shape %s of %q holds %q, neither a key nor vocabulary", out, in, s)
			}
		}, 3*len(in)) // invalid UTF-8 decodes to U+FFFD, 3 bytes per input byte
	})
}

func collectKeys(v any, keys map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			keys[k] = true
			collectKeys(e, keys)
		}
	case []any:
		for _, e := range v {
			collectKeys(e, keys)
		}
	}
}

func walkShape(t *testing.T, v any, str func(string), maxNum int) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			str(k)
			walkShape(t, e, str, maxNum)
		}
	case []any:
		t.Fatalf("shape holds a JSON array %v", v)
	case string:
		str(v)
	case float64:
		if v < 0 || v > float64(maxNum) || v != float64(int(v)) {
			t.Fatalf("shape number %v is not a size", v)
		}
	default:
		t.Fatalf("shape holds %T %v", v, v)
	}
}
