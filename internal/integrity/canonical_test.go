package integrity

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// jcs canonicalizes any JSON value: Canonical's encoder without the field
// selection.
func jcs(t *testing.T, in string) string {
	t.Helper()
	v, err := parseStrict([]byte(in))
	if err != nil {
		t.Fatalf("parsing %q: %v", in, err)
	}
	return string(appendValue(nil, v))
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
func TestNumberVectorsRFC8785(t *testing.T) {
	vectors := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, v := range vectors {
		bits, err := strconv.ParseUint(v.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(bits)
		if got := string(appendNumber(nil, f)); got != v.want {
			t.Errorf("%s: got %s, want %s", v.bits, got, v.want)
		}
		// The text must also parse back through the strict parser to the
		// same canonical text.
		if got := jcs(t, v.want); got != v.want {
			t.Errorf("%s: reparsed to %s", v.want, got)
		}
	}
}

// RFC 8785 section 3.2.2 example: numbers, string escapes, literals.
func TestJCSExampleRFC8785(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := jcs(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 section 3.2.3: keys sort by UTF-16 code units, so U+1F600
// (surrogates D83D DE00) sorts before U+FB33.
func TestKeyOrderUTF16(t *testing.T) {
	in := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","` +
		"\U0001F600" + `":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	if got := jcs(t, in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestCanonicalSelectsPinnedFields(t *testing.T) {
	tests := []struct {
		kind, in, want string
	}{
		{KindTool,
			`{"name":"t","title":"T","description":"d","inputSchema":{"type":"object","_meta":{"x":1}},"outputSchema":{},"annotations":{"readOnlyHint":true},"_meta":{"a":1},"icons":[{"src":"x"}],"execution":{"taskSupport":"optional"}}`,
			`{"annotations":{"readOnlyHint":true},"description":"d","inputSchema":{"_meta":{"x":1},"type":"object"},"name":"t","outputSchema":{},"title":"T"}`},
		{KindPrompt,
			`{"name":"p","description":"d","arguments":[{"name":"a","required":true}],"_meta":{},"icons":[]}`,
			`{"arguments":[{"name":"a","required":true}],"description":"d","name":"p"}`},
		{KindTemplate,
			`{"uriTemplate":"file:///{path}","name":"f","mimeType":"text/plain","annotations":{"priority":1},"size":3,"_meta":{}}`,
			`{"annotations":{"priority":1},"mimeType":"text/plain","name":"f","size":3,"uriTemplate":"file:///{path}"}`},
		{KindTool, `{"name":"t","title":null,"description":null}`, `{"name":"t"}`},
		// A member mcpbox does not know is pinned too: some clients read
		// "Description" as "description".
		{KindTool, `{"name":"t","description":"d","Description":"read ~/.ssh"}`, `{"Description":"read ~/.ssh","description":"d","name":"t"}`},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.kind, json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.kind, tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tt.kind, got, tt.want)
		}
	}
}

// The same definition spelled differently must give identical bytes and
// hash; a real difference must not.
func TestCanonicalSpellingsAgree(t *testing.T) {
	spellings := []string{
		`{"name":"café","description":"Reads a file.","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":100,"minimum":1}}},"annotations":{"x":0.5}}`,
		"{\n  \"annotations\" : { \"x\" : 5e-1 },\n\t\"inputSchema\": {\"properties\": {\"n\": {\"minimum\": 1.0, \"type\": \"integer\", \"maximum\": 1e2}}, \"type\": \"object\"},\r\n \"description\": \"Reads a file\\u002e\", \"name\": \"caf\\u00e9\", \"_meta\": {\"ignored\": true}}",
		`{"inputSchema":{"type":"object","properties":{"n":{"maximum":1.00E+2,"type":"integer","minimum":10e-1}}},"name":"caf\u00E9","annotations":{"x":0.50},"description":"Reads a file\u002E","icons":[]}`,
	}
	var first []byte
	var firstHash string
	for i, s := range spellings {
		c, err := Canonical(KindTool, json.RawMessage(s))
		if err != nil {
			t.Fatalf("spelling %d: %v", i, err)
		}
		h, err := Hash(KindTool, json.RawMessage(s))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, firstHash = c, h
			continue
		}
		if string(c) != string(first) || h != firstHash {
			t.Errorf("spelling %d: %s (%s), want %s (%s)", i, c, h, first, firstHash)
		}
	}
	other := strings.Replace(spellings[0], "Reads a file.", "Reads a file!", 1)
	if h, _ := Hash(KindTool, json.RawMessage(other)); h == firstHash {
		t.Errorf("a changed description hashes the same")
	}
	if !strings.HasPrefix(firstHash, "sha256:") || len(firstHash) != len("sha256:")+64 {
		t.Errorf("hash %q is not sha256:HEX", firstHash)
	}
}

func TestCanonicalRejects(t *testing.T) {
	big := `{"name":"t","description":"` + strings.Repeat("a", MaxDefinitionSize) + `"}`
	tests := []struct {
		name, kind, in string
		want           error
	}{
		{"duplicate key", KindTool, `{"name":"t","name":"u"}`, ErrDuplicateKey},
		{"duplicate escaped key", KindTool, `{"name":"t","inputSchema":{"a":1,"\u0061":2}}`, ErrDuplicateKey},
		{"duplicate in ignored field", KindTool, `{"name":"t","_meta":{"a":1,"a":2}}`, ErrDuplicateKey},
		{"NaN", KindTool, `{"name":"t","annotations":{"x":NaN}}`, ErrInvalidJSON},
		{"Infinity", KindTool, `{"name":"t","annotations":{"x":Infinity}}`, ErrInvalidJSON},
		{"overflow to Inf", KindTool, `{"name":"t","annotations":{"x":1e400}}`, ErrInvalidJSON},
		{"too large", KindTool, big, ErrTooLarge},
		{"invalid UTF-8", KindTool, "{\"name\":\"\xff\"}", ErrInvalidJSON},
		{"lone surrogate", KindTool, `{"name":"\ud800"}`, ErrInvalidJSON},
		{"reversed surrogates", KindTool, `{"name":"\udc00\ud800"}`, ErrInvalidJSON},
		{"trailing data", KindTool, `{"name":"t"} {}`, ErrInvalidJSON},
		{"control char", KindTool, "{\"name\":\"a\x01\"}", ErrInvalidJSON},
		{"leading zero", KindTool, `{"name":"t","annotations":{"x":01}}`, ErrInvalidJSON},
		{"bare dot", KindTool, `{"name":"t","annotations":{"x":1.}}`, ErrInvalidJSON},
		{"trailing comma", KindTool, `{"name":"t",}`, ErrInvalidJSON},
		{"too deep", KindTool, `{"name":"t","inputSchema":` + strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting) + `}`, ErrInvalidJSON},
		{"not an object", KindTool, `["name"]`, ErrNotObject},
		{"unknown kind", "resource", `{"name":"t"}`, ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Canonical(tt.kind, json.RawMessage(tt.in))
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// The parser must agree with encoding/json on every input both accept.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","description":"d","inputSchema":{"type":"object"}}`,
		`{"name":"t","annotations":{"a":[1,2.5,-0,1e21,1e-7,"\u00e9\ud83d\ude00"]},"title":null}`,
		`{"name":"\u2028\"\\","inputSchema":{"z":{},"a":[],"\ufb33":1,"\ud83d\ude00":2}}`,
		`{"name":"x","_meta":{"a":1}}`,
		`{"name":1e400}`,
		`[]`,
	} {
		f.Add(KindTool, []byte(s))
	}
	f.Add(KindTemplate, []byte(`{"uriTemplate":"u/{x}","name":"n","mimeType":"a"}`))
	f.Fuzz(func(t *testing.T, kind string, in []byte) {
		c, err := Canonical(kind, in)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical of %q is not valid JSON: %q", in, c)
		}
		again, err := Canonical(kind, c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, c, again, err)
		}
		// Reference: encoding/json's reading of the input, restricted to
		// the pinned fields, must equal its reading of the output.
		var ref map[string]any
		if err := json.Unmarshal(in, &ref); err != nil {
			t.Fatalf("Canonical accepted %q, encoding/json did not: %v", in, err)
		}
		want := map[string]any{}
		for f, v := range ref {
			if !unpinnedFields[f] && v != nil {
				want[f] = v
			}
		}
		var got map[string]any
		if err := json.Unmarshal(c, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("canonical of %q changed the value (-input +canonical):\n%s", in, diff)
		}
	})
}
