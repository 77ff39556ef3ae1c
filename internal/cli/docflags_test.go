package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocumentedFlagsExist: every flag the README and docs/ give an
// mcpbox command (`mcpbox logs --follow`, in a code block or inline code)
// is a flag of that command, as its --help lists it: a user who pastes
// the docs does not meet "flag provided but not defined".
func TestDocumentedFlagsExist(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	helps := map[string]string{}
	checked := 0
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, use := range documentedFlags(string(b)) {
			if !slices.ContainsFunc(commands, func(c command) bool { return c.name == use.cmd && !c.hidden }) {
				continue // the hidden agent and egress-proxy, or prose ("mcpbox is")
			}
			help, ok := helps[use.cmd]
			if !ok {
				_, help, _ = runCLI(use.cmd, "--help")
				helps[use.cmd] = help
			}
			checked++
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(use.flag) + `( |$)`).MatchString(help) {
				t.Errorf("%s: `%s` uses %s, which mcpbox %s --help does not list", filepath.Base(path), use.line, use.flag, use.cmd)
			}
		}
	}
	if checked < 40 {
		t.Errorf("checked only %d documented flags: has the docs' shape changed?", checked)
	}
}

type flagUse struct{ cmd, flag, line string }

// documentedFlags finds "mcpbox CMD ... --flag" in the lines of code
// blocks and in inline code spans: the flags of one command line, up to
// its end, a "--" (the sandboxed command's own arguments follow), a
// comment, a pipe or another command.
func documentedFlags(doc string) []flagUse {
	var spans []string
	inBlock := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			spans = append(spans, l)
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(l, -1) {
			spans = append(spans, m[1])
		}
	}
	var uses []flagUse
	cmdRE := regexp.MustCompile(`(?:^|[\s/"(])mcpbox ([a-z][a-z-]*)`)
	for _, s := range spans {
		for _, loc := range cmdRE.FindAllStringSubmatchIndex(s, -1) {
			cmd := s[loc[2]:loc[3]]
			rest := s[loc[1]:]
		words:
			for _, w := range strings.Fields(rest) {
				end := strings.HasSuffix(w, ";") // the next clause is prose
				w = strings.Trim(w, "[]()|,;'\"")
				switch {
				case w == "--help":
				case w == "--" || w == "#" || strings.HasPrefix(w, "#") || w == "&&" || w == ">" || w == "mcpbox" || strings.HasSuffix(w, "mcpbox"):
					break words
				case strings.HasPrefix(w, "--") && len(w) > 2:
					name, _, _ := strings.Cut(w, "=")
					if regexp.MustCompile(`^--[a-z][a-z-]*$`).MatchString(name) {
						uses = append(uses, flagUse{cmd, name, strings.TrimSpace(s)})
					}
				}
				if end {
					break
				}
			}
		}
	}
	return uses
}

// TestDashboardNamesRealCommands: a command line the dashboard's pages
// tell the user to run (<code>mcpbox ...</code>) is one mcpbox runs as
// written: no unknown command, missing subcommand or unknown flag.
func TestDashboardNamesRealCommands(t *testing.T) {
	static, err := filepath.Abs("../dashboard/static")
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(static, "*.html"))
	t.Chdir(t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", "")
	n := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`<code>mcpbox ([^<]+)</code>`).FindAllStringSubmatch(string(b), -1) {
			n++
			_, _, errs := runCLI(strings.Fields(m[1])...)
			for _, bad := range []string{"unknown command", "want a subcommand", "flag provided but not defined", "unexpected arguments"} {
				if strings.Contains(errs, bad) {
					t.Errorf("%s tells the user to run `mcpbox %s`, which says: %s", filepath.Base(page), m[1], errs)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no <code>mcpbox ...</code> in the dashboard's pages: has their shape changed?")
	}
}
