package credinject

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// classOf is a character's class as the placeholder keeps it.
func classOf(c byte) byte {
	switch {
	case c >= 'a' && c <= 'z':
		return 'a'
	case c >= 'A' && c <= 'Z':
		return 'A'
	case c >= '0' && c <= '9':
		return '0'
	}
	return c
}

func TestPlaceholderShape(t *testing.T) {
	for _, tc := range []struct{ real, prefix string }{
		{"ghp_R3alT0kenAAAAbbbbCCCCddddEEEEffff1234", "ghp_"},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV", "github_pat_"},
		{"sk-proj-abcDEF123ghiJKL456mnoPQR789stuVWX012yzABC345", "sk-proj-"},
		{"xoxb-1234567890-0987654321-REALslackTOKENvalue", "xoxb-"},
		{"glpat-abcdefghij0123456789", "glpat-"},
		{"mytoken_ABCDEFabcdef0123456789xyzXYZ", "mytoken_"},
		{"PK-ABCDEFabcdef0123456789xyzXYZ", "PK-"},
	} {
		seen := map[string]bool{}
		for range 20 {
			p, err := placeholderFor(tc.real)
			if err != nil {
				t.Fatalf("%s: %v", tc.real, err)
			}
			if len(p) != len(tc.real) || !strings.HasPrefix(p, tc.prefix) || p == tc.real || seen[p] {
				t.Fatalf("placeholder %q for %q: want same length, prefix %q, fresh", p, tc.real, tc.prefix)
			}
			seen[p] = true
			for i := range p {
				if classOf(p[i]) != classOf(tc.real[i]) {
					t.Fatalf("placeholder %q changes the class at %d of %q", p, i, tc.real)
				}
			}
			if strings.Contains(p, tc.real[len(tc.prefix):len(tc.prefix)+8]) {
				t.Errorf("placeholder %q keeps a run of the value", p)
			}
		}
	}
}

func TestPlaceholderHexStaysHex(t *testing.T) {
	real := "0123456789abcdef0123456789abcdef01234567"
	p, err := placeholderFor(real)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Trim(p, "0123456789abcdef") != "" {
		t.Errorf("hex value got a non-hex placeholder %q", p)
	}
}

func TestPlaceholderTooShortRefused(t *testing.T) {
	for _, v := range []string{"ghp_short", "12345678901234", "sk-abcdefghijk"} {
		if _, err := placeholderFor(v); err == nil || !strings.Contains(err.Error(), "too short") {
			t.Errorf("placeholderFor(%q) = %v, want too short", v, err)
		}
	}
}

func TestJWTPlaceholder(t *testing.T) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT","kid":"k1"}`))
	claims := `{"iss":"https://issuer.example","sub":"user-1234567890","aud":"api","exp":1893456000,"iat":1700000000,"email":"someone@example.com","org":{"id":"org_ABCdef123"}}`
	sig := enc.EncodeToString([]byte(strings.Repeat("s", 256)))
	real := header + "." + enc.EncodeToString([]byte(claims)) + "." + sig
	p, err := jwtPlaceholderFor(real)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(p, ".")
	if len(parts) != 3 || parts[0] != header || len(p) != len(real) || parts[2] == sig {
		t.Fatalf("placeholder %q: want the header kept, same length, a new signature", p)
	}
	raw, err := enc.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("claims %q: %v", raw, err)
	}
	json.Unmarshal([]byte(claims), &want)
	for _, k := range []string{"iss", "aud", "exp", "iat"} {
		if got[k] != want[k] {
			t.Errorf("claim %s = %v, want kept %v", k, got[k], want[k])
		}
	}
	if got["sub"] == want["sub"] || got["email"] == want["email"] || len(got["sub"].(string)) != len(want["sub"].(string)) {
		t.Errorf("sub/email not randomized in shape: %v", got)
	}
	if strings.Index(string(raw), `"email"`) != strings.Index(claims, `"email"`) {
		t.Error("claim layout changed")
	}
	if _, err := jwtPlaceholderFor("not.a-jwt"); err == nil {
		t.Error("a non-JWT was accepted for shape jwt")
	}
}

func TestPlaceholdersDifferPerSet(t *testing.T) {
	cred := Credential{Name: "A", Value: realA, Hosts: []string{"api.github.com"}, Header: "Authorization"}
	s1, err := New(Options{Credentials: []Credential{cred}})
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := New(Options{Credentials: []Credential{cred}})
	p1, _ := s1.Placeholder("A")
	p2, _ := s2.Placeholder("A")
	if p1 == p2 {
		t.Error("two sandboxes got the same placeholder")
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		c    Credential
		want string
	}{
		{Credential{Name: "A", Value: realA, Header: "X"}, "no hosts"},
		{Credential{Name: "A", Value: realA, Hosts: []string{"*"}, Header: "X"}, "named hosts"},
		{Credential{Name: "A", Value: realA, Hosts: []string{"*.com"}, Header: "X"}, "two labels"},
		{Credential{Name: "A", Value: realA, Hosts: []string{"a.com"}}, "nowhere to inject"},
		{Credential{Name: "A", Value: realA, Hosts: []string{"a.com"}, Header: "X", Format: "Bearer"}, "{value}"},
		{Credential{Name: "A", Value: realA, Hosts: []string{"a.com"}, Header: "X", Shape: "uuid"}, "unknown shape"},
		{Credential{Name: "A", Hosts: []string{"a.com"}, AWS: &AWS{AccessKeyID: awsKeyID}}, "required"},
		{Credential{Name: "A", Value: "x", Hosts: []string{"a.com"}, AWS: &AWS{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret}}, "do not apply"},
	} {
		if _, err := New(Options{Credentials: []Credential{tc.c}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
}

// A value that begins with a random-looking run before a '_' or '-'
// keeps none of it: the run is the value's own, and was told to the
// sandbox (up to 11 characters) when any run was kept.
func TestPlaceholderKeepsNoRandomRun(t *testing.T) {
	for _, real := range []string{
		"Q7xK2mP9zL4_abcdefghijklmnopqrstuvwxyz0123",
		"QxKmPzLw_abcdefghijklmnopqrstuvwxyz0123",
		"abcdefghi_jklmnopqrstuvwxyz0123456789ABCD",
		"a1b2c3-abcdefghijklmnopqrstuvwxyz0123",
	} {
		p, err := placeholderFor(real)
		if err != nil {
			t.Fatalf("%s: %v", real, err)
		}
		head := real[:strings.IndexAny(real, "_-")]
		if strings.HasPrefix(p, head) {
			t.Errorf("placeholder %q keeps the value's run %q", p, head)
		}
	}
}

// TestRunKnownJWT: of a JWT, only the signature is the value's own for
// redact.Runs: a fresh token of the same issuer and subject (a login or
// refresh answer) shares its header and claims, and passed as a mark.
func TestRunKnownJWT(t *testing.T) {
	real := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsImlzcyI6Imh0dHBzOi8vYXMuZXhhbXBsZSJ9.c2lnbmF0dXJlLW9mLXRoZS1yZWFsLXRva2VuLTAxMjM0NTY3"
	ph, err := placeholderFor(real)
	if err != nil {
		t.Fatal(err)
	}
	known := runKnown(real, ph)
	sig := strings.LastIndex(real, ".") + 1
	if string(known[:sig]) != real[:sig] {
		t.Errorf("runKnown = %q, want the header and claims of %q", known, real)
	}
	for i := sig; i < len(real); i++ {
		if known[i] == real[i] && isAlnum(real[i]) {
			t.Errorf("runKnown: the signature's byte %d counts as known", i)
		}
	}
}

// TestRunKnownChance: a letter or digit that the random placeholder
// shares with the value by chance is not known (the sandbox cannot tell
// which): counted as known, it let 10-byte slices of a value whose runs
// need 10 secret bytes pass (two sandboxes in three). The kept prefix and
// punctuation are known.
func TestRunKnownChance(t *testing.T) {
	real := "sk-live9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee"
	ph := []byte(real)
	for i := 3; i < len(ph); i++ {
		if i%3 != 0 {
			ph[i] = 'x' // every third byte as if by chance equal
		}
	}
	known := runKnown(real, string(ph))
	for i := range real {
		if want := i < 3; (known[i] == real[i]) != want {
			t.Errorf("byte %d (%q): known %v, want %v", i, real[i], known[i] == real[i], want)
		}
	}
	if got := runKnown("ab.cd-ef", "xy.zw-uv"); got[2] != '.' || got[5] != '-' || got[0] == 'a' {
		t.Errorf("runKnown keeps punctuation: %q", got)
	}
}
