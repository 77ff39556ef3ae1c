package redact

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func TestJSONNested(t *testing.T) {
	secret := `s:3'cir<3StE/]+3v` + "`=wa'&/lX\"bupe5-:<;>? (\\D"
	r, err := New([]Secret{{Name: "T", Value: []byte(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := json.Marshal(map[string]string{"TOKEN_A": secret})     // JSON text...
	twice, _ := json.Marshal(map[string]string{"text": string(inner)}) // ...in a JSON string
	thrice, _ := json.Marshal(map[string]string{"text": string(twice)})
	path, _ := json.Marshal(map[string]string{"text": url.PathEscape(secret)}) // & written as \u0026
	for name, msg := range map[string][]byte{"twice": twice, "thrice": thrice, "path escape": path} {
		t.Run(name, func(t *testing.T) {
			out := r.JSON(msg)
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			// Decode as a client would, as often as it was encoded.
			text := string(out)
			for range 4 {
				if strings.Contains(text, "[REDACTED:T]") {
					break
				}
				var m map[string]string
				if json.Unmarshal([]byte(text), &m) != nil {
					break
				}
				text = m["text"]
			}
			if !strings.Contains(string(out), "[REDACTED:T]") {
				t.Fatalf("no marker in %s", out)
			}
			for _, part := range []string{"3StE", "bupe5", "cir%3C3StE"} {
				if strings.Contains(text, part) || strings.Contains(string(out), part) {
					t.Fatalf("%q left in %s", part, out)
				}
			}
		})
	}
	plain := []byte(`{"a":"no escapes here","b":[1,2,{"c":"x\ny"}]}`)
	if got := r.JSON(plain); string(got) != string(plain) {
		t.Fatalf("unchanged message rewritten: %s", got)
	}
}
