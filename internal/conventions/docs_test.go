package conventions

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
)

func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfigReferenceCoversSchema: every key the config parser knows
// (each field of internal/config/schema.go) is named in docs/config.md,
// so the reference cannot fall behind the schema.
func TestConfigReferenceCoversSchema(t *testing.T) {
	schema := readRepo(t, "internal/config/schema.go")
	doc := readRepo(t, "docs/config.md")
	keys := regexp.MustCompile(`\{"([a-z_]+)", func`).FindAllStringSubmatch(schema, -1)
	if len(keys) < 50 {
		t.Fatalf("found only %d keys in schema.go: has its shape changed?", len(keys))
	}
	var missing []string
	for _, k := range keys {
		if !strings.Contains(doc, "`"+k[1]+"`") && !strings.Contains(doc, "."+k[1]+"`") && !strings.Contains(doc, k[1]+":") && !slices.Contains(missing, k[1]) {
			missing = append(missing, k[1])
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/config.md does not name these config keys: %s", strings.Join(missing, ", "))
	}
}

// TestDocExamplesParse: every complete config example in the docs (a yaml
// block that starts with "version: 1") is valid.
func TestDocExamplesParse(t *testing.T) {
	block := regexp.MustCompile("(?s)```ya?ml\n(.*?)```")
	n := 0
	for _, f := range []string{"README.md", "docs/config.md", "docs/quickstart.md", "internal/cli/default.yaml"} {
		text := readRepo(t, f)
		bodies := block.FindAllStringSubmatch(text, -1)
		if strings.HasSuffix(f, ".yaml") {
			bodies = [][]string{{"", text}}
		}
		for i, b := range bodies {
			body := b[1]
			if !strings.HasPrefix(strings.TrimSpace(stripComments(body)), "version: 1") {
				continue
			}
			n++
			if _, err := config.Load(f, []byte(body)); err != nil {
				t.Errorf("%s, example %d: %v", f, i+1, err)
			}
		}
	}
	if n < 3 {
		t.Errorf("found only %d complete config examples in the docs", n)
	}
}

// TestDocFragmentsParse: every config example in the docs is valid as a
// user would paste it: a whole one (version: 1) as it is, a partial one
// (a yaml block of top-level keys, such as the reference's `servers:` and
// `listen:` snippets) once it is made a whole config, with "version: 1"
// before it and a minimal server when it has none. Blocks indented in a
// list item count too; a digest written "sha256:..." stands for a real one.
func TestDocFragmentsParse(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	docs = append(docs, filepath.Join("..", "..", "README.md"))
	placeholder := strings.NewReplacer("sha256:...", "sha256:"+strings.Repeat("0", 64))
	n := 0
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, body := range yamlBlocks(string(b)) {
			whole := placeholder.Replace(stripComments(body))
			if !strings.HasPrefix(strings.TrimSpace(whole), "version: 1") {
				whole = "version: 1\n" + whole
				if !regexp.MustCompile(`(?m)^servers:`).MatchString(whole) {
					whole += "\nservers:\n  s: {url: \"https://mcp.example.com/mcp\", tools: {allow: [\"*\"]}}\n"
				}
			}
			n++
			if _, err := config.Load(filepath.Base(path), []byte(whole)); err != nil {
				t.Errorf("%s, yaml block %d: %v\n%s", filepath.Base(path), i+1, err, body)
			}
		}
	}
	if n < 40 {
		t.Errorf("found only %d config examples in the docs: has their shape changed?", n)
	}
}

// yamlBlocks returns the bodies of a markdown text's yaml code blocks,
// those indented in a list item with their indent taken off.
func yamlBlocks(text string) []string {
	var blocks []string
	var cur []string
	indent, in := "", false
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case !in && (trimmed == "```yaml" || trimmed == "```yml"):
			in, indent, cur = true, l[:len(l)-len(trimmed)], nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(l, indent))
		}
	}
	return blocks
}

// stripComments drops leading comment lines.
func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && len(out) == 0 {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestReadmeBuildOutputsIgnored: each binary the README has users build
// in the checkout (go build -o NAME) is in .gitignore. An untracked one
// marks every later build vcs.modified, and a mcpbox so stamped never
// runs mcpbox-init as its sandbox init (its build cannot be shown to be
// the same): a leftover mcpbox-init turned itself off at the next build.
func TestReadmeBuildOutputsIgnored(t *testing.T) {
	readme := readRepo(t, "README.md")
	ignore := strings.Split(readRepo(t, ".gitignore"), "\n")
	outs := regexp.MustCompile(`go build -o ([\w.-]+) `).FindAllStringSubmatch(readme, -1)
	if len(outs) < 2 {
		t.Fatalf("found %d `go build -o NAME` in README.md, want mcpbox and mcpbox-init: has its shape changed?", len(outs))
	}
	for _, o := range outs {
		if !slices.Contains(ignore, "/"+o[1]) {
			t.Errorf("README.md builds %s in the checkout, and .gitignore has no /%s", o[1], o[1])
		}
	}
}
