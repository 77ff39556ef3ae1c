package integrity

import (
	"fmt"
	"strings"
)

// modelTags are the tag names (lower case, '_' '-' and spaces removed)
// that address the model rather than format text. Placeholders that look
// like tags in honest usage text ("<user>", "<model>", "<path>") are not
// here.
var modelTags = map[string]bool{
	"important": true, "importantnote": true, "importantinstructions": true, "critical": true, "urgent": true, "mandatory": true,
	"system": true, "systemprompt": true, "systemmessage": true, "systeminstructions": true, "systeminstruction": true, "sys": true,
	"instructions": true, "instruction": true, "hiddeninstructions": true, "secretinstructions": true, "secret": true, "hidden": true,
	"assistant": true, "aiinstructions": true, "assistantinstructions": true, "toolinstructions": true, "inst": true, "override": true,
}

// maxTagLen bounds how far a tag name is read: a longer run is no tag.
const maxTagLen = 40

// hiddenTags finds model-aimed markup in normalized text.
func (s *scanner) hiddenTags(f scanField, n normText) {
	t := n.s
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '<' && c != '[' {
			continue
		}
		end, what := tagAt(t, i, s.result)
		if end < 0 {
			continue
		}
		if s.known(RuleHiddenTag, SeverityHigh, f.where) {
			return
		}
		a, b := n.span(f.text, i, end)
		s.add(RuleHiddenTag, f.where, f.text, a, b, "markup aimed at the model: "+quoted(what))
	}
}

// tagAt reports the end of a model-aimed tag at t[i] and its text, or -1.
func tagAt(t string, i int, result bool) (int, string) {
	rest := t[i:]
	switch {
	case strings.HasPrefix(rest, "<|"):
		return specialToken(t, i)
	case strings.HasPrefix(rest, "<<sys>>"), strings.HasPrefix(rest, "<</sys>>"):
		e := i + strings.IndexByte(rest, '>') + 2
		return e, t[i:e]
	case strings.HasPrefix(rest, "[inst]"), strings.HasPrefix(rest, "[/inst]"):
		e := i + strings.IndexByte(rest, ']') + 1
		return e, t[i:e]
	case strings.HasPrefix(rest, "<!--") && !result:
		// An HTML comment hides text from rendered views only.
		return i + 4, "<!--"
	case rest[0] == '<':
		return xmlTag(t, i)
	}
	return -1, ""
}

// specialToken matches chat-template tokens: <|im_start|>, <|system|>,
// <|endoftext|>, <|start_header_id|> ...
func specialToken(t string, i int) (int, string) {
	j := i + 2
	for j < len(t) && j-i < maxTagLen && (t[j] >= 'a' && t[j] <= 'z' || t[j] == '_' || t[j] == '/' || t[j] >= '0' && t[j] <= '9') {
		j++
	}
	if j > i+2 && strings.HasPrefix(t[j:], "|>") {
		return j + 2, t[i : j+2]
	}
	return -1, ""
}

// xmlTag matches <name ...> and </name> with name in modelTags.
func xmlTag(t string, i int) (int, string) {
	j := i + 1
	if j < len(t) && t[j] == '/' {
		j++
	}
	for j < len(t) && t[j] == ' ' {
		j++
	}
	var name strings.Builder
	for ; j < len(t) && j-i < maxTagLen; j++ {
		c := t[j]
		if c >= 'a' && c <= 'z' {
			name.WriteByte(c)
		} else if c != '_' && c != '-' {
			break
		}
	}
	if !modelTags[name.String()] || j >= len(t) {
		return -1, ""
	}
	// Attributes may follow, up to a bounded '>'.
	for k := j; k < len(t) && k-i < 2*maxTagLen; k++ {
		switch t[k] {
		case '>':
			return k + 1, t[i : k+1]
		case '<':
			return -1, ""
		}
	}
	return -1, ""
}

// credentialMarkers name files and blocks that hold secrets; the boundary
// checks in credentialAt keep "process.env" and ".env.example" out.
var credentialMarkers = []string{
	".ssh", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "authorized_keys",
	".env", "mcp.json", "mcp_config.json", "claude_desktop_config.json",
	".aws/credentials", "aws_secret_access_key", "application_default_credentials", ".config/gcloud",
	".kube/config", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", ".docker/config.json",
	"/etc/shadow", ".gnupg", "wallet.dat", ".bash_history", ".zsh_history", "private key-----",
}

// envTemplates are the .env.SUFFIX files that hold no secrets by
// convention.
var envTemplates = map[string]bool{"example": true, "sample": true, "template": true, "dist": true, "defaults": true, "schema": true, "tpl": true}

// credentialPaths reports the secret files named in normalized text.
func (s *scanner) credentialPaths(f scanField, n normText) {
	t := n.s
	for _, m := range credentialMarkers {
		for from := 0; from < len(t); {
			k := strings.Index(t[from:], m)
			if k < 0 {
				break
			}
			k += from
			from = k + len(m)
			if !credentialAt(t, k, m) {
				continue
			}
			a, b := n.span(f.text, k, k+len(m))
			s.add(RuleCredentialAccess, f.where, f.text, a, b, fmt.Sprintf("names a secret file or key: %s", quoted(m)))
			break
		}
	}
}

// credentialAt checks the boundaries of marker m found at t[k].
func credentialAt(t string, k int, m string) bool {
	if k > 0 && identByte(t[k-1]) && m[0] != '/' && m[0] != '.' || k > 0 && m[0] == '.' && (identByte(t[k-1]) || t[k-1] == '.') {
		return false // "process.env", "my_id_rsa_count"
	}
	after := t[k+len(m):]
	if m == "private key-----" {
		return true
	}
	if after != "" && (identByte(after[0]) || after[0] == '-') {
		return false // ".envoy", "id_rsa2"? ".sshd"
	}
	if strings.HasPrefix(after, ".pub") && strings.HasPrefix(m, "id_") {
		return false // a public key
	}
	if m == ".env" && strings.HasPrefix(after, ".") {
		j := 1
		for j < len(after) && identByte(after[j]) {
			j++
		}
		return !envTemplates[after[1:j]]
	}
	return true
}

func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}
