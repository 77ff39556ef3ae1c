package importer

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

var jsonPosRE = regexp.MustCompile(`^c\.json:(\d+):(\d+): `)

// FuzzImport imports arbitrary client configs. Properties: a refused file
// gets an error naming it (and a line inside it, when it has one); every
// server entry is either imported or noted as skipped; what is imported
// renders to a config that loads with the same servers; and a header value
// or a credential env value never reaches the generated config.
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/home/u"]}}}`,
		`{"servers":{"gh":{"type":"http","url":"https://api.example.com/mcp","headers":{"Authorization":"Bearer ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}}}`,
		`{"mcpServers":{"a":{"command":"x","env":{"API_KEY":"s3cr3t-value-1234","PLAIN":"v","REF":"${env:HOME}"}},"A":{"command":"y","env":{"API_KEY":"other-secret-5678"}}}}`,
		`{"projects":{"/p":{"mcpServers":{"p":{"command":"c","disabled":true}}}},"mcpServers":{"q":{"url":"http://u:pw@h/x?token=t"}}}`,
		"// c\n{\"mcpServers\":{\"x\":{\"command\":\"c\",},},/* d */}",
		`{"mcpServers":{"__":{"command":"c"},"-":{"command":"c"},"":{"url":"https://h"}}}`,
		`{"mcpServers":{"x":{"command":"c","args":["--api-key","k","--token=t"]}},"mcpServers":{}}`,
		`{"mcpServers":{"x":{"type":"ws","command":"c"},"y":{"command":"c","url":"https://h"},"z":{}}}`,
		`{"mcpServers":[]}`,
		"{\n\"a\": tru}",
		`[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := ParseClientFile("c.json", data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "c.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			if m := jsonPosRE.FindStringSubmatch(msg); m != nil {
				line, _ := strconv.Atoi(m[1])
				if lines := bytes.Count(data, []byte("\n")) + 1; line < 1 || line > lines {
					t.Fatalf("error at line %d of a %d-line file: %v", line, lines, err)
				}
			}
			return
		}
		res := Convert(cf, Host{})
		c := res.Config
		skipped := 0
		for _, n := range res.Notes {
			if strings.HasPrefix(n, "skipping server ") {
				skipped++
			}
		}
		if len(c.Servers)+skipped != len(cf.entries) {
			t.Fatalf("%d entries, %d imported, %d skipped: %q", len(cf.entries), len(c.Servers), skipped, res.Notes)
		}
		if len(c.Servers) == 0 {
			return
		}
		out, err := Render(res, "c.json")
		if err != nil {
			t.Fatalf("rendering the imported config: %v", err)
		}
		back, err := config.Load("mcpbox.yaml", out)
		if err != nil {
			t.Fatalf("the imported config does not load: %v\n%s", err, out)
		}
		if len(back.Servers) != len(c.Servers) {
			t.Fatalf("%d servers imported, %d loaded back", len(c.Servers), len(back.Servers))
		}
		for _, v := range secretValues(cf.entries) {
			if len(v) >= 8 && bytes.Count(data, []byte(v)) == 1 && bytes.Contains(out, []byte(v)) {
				t.Fatalf("credential %q reached the generated config:\n%s", v, out)
			}
		}
	})
}

// secretValues returns the header values and credential env values of
// entries: what import must never copy into the config.
func secretValues(entries []member) []string {
	var out []string
	for _, m := range entries {
		var ent mcpEntry
		if json.Unmarshal(m.val, &ent) != nil {
			continue
		}
		hs, _ := members(ent.Headers)
		for _, h := range hs {
			var v string
			if json.Unmarshal(h.val, &v) == nil {
				out = append(out, v)
			}
		}
		env, _ := members(ent.Env)
		for _, e := range env {
			var v string
			if json.Unmarshal(e.val, &v) == nil && (config.CredentialName(e.key) || credentialValue(v)) {
				out = append(out, v)
			}
		}
	}
	return out
}
