package redact

import (
	"bytes"
	"regexp"
	"sort"
	"sync"
)

// Rule is a pattern of a credential format: a string of that shape is
// flagged even when it is not one of our secrets (a server may read a
// key from a file, or an API may echo a token).
type Rule struct {
	ID          string
	Description string
	pattern     string
	// keywords: the rule can only match where one of them occurs, so
	// the regexp runs only on buffers that contain one.
	keywords []string
}

// Finding is a match of a Rule in a buffer: b[Start:End].
type Finding struct {
	Rule       string
	Start, End int
}

// Rules is the curated rule set: formats with a distinctive shape (a
// fixed prefix or armour), so that ordinary text rarely matches. The
// patterns are written for this project after the formats' public
// documentation; they work on raw JSON too, where newlines in a key are
// the two characters \n.
var Rules = []Rule{
	// To its END line; failing that (a truncated key), over its body.
	{"private-key", "PEM private key block", `-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[^"]+?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:,-]|\s|\\[nr])*)`, []string{"PRIVATE KEY"}},
	{"aws-access-key-id", "AWS access key id", `\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`, []string{"AKIA", "ASIA", "ABIA", "ACCA"}},
	{"github-token", "GitHub personal, OAuth, app or refresh token", `\bgh[pousr]_[A-Za-z0-9]{36,255}\b`, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{"github-fine-grained-pat", "GitHub fine-grained personal access token", `\bgithub_pat_[A-Za-z0-9_]{82}\b`, []string{"github_pat_"}},
	{"gitlab-token", "GitLab personal access token", `\bglpat-[A-Za-z0-9_-]{20,}\b`, []string{"glpat-"}},
	{"slack-token", "Slack bot, user or app token", `\bxox[abeoprs]-[A-Za-z0-9-]{10,250}\b`, []string{"xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"}},
	{"slack-webhook", "Slack incoming webhook URL", `https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{43,56}`, []string{"hooks.slack.com"}},
	{"stripe-key", "Stripe secret or restricted key", `\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,247}\b`, []string{"_live_", "_test_"}},
	{"google-api-key", "Google API key", `\bAIza[0-9A-Za-z_-]{35}\b`, []string{"AIza"}},
	{"openai-key", "OpenAI API key", `\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}\b`, []string{"T3BlbkFJ"}},
	{"anthropic-key", "Anthropic API key", `\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,120}\b`, []string{"sk-ant-"}},
	{"npm-token", "npm access token", `\bnpm_[A-Za-z0-9]{36}\b`, []string{"npm_"}},
	{"pypi-token", "PyPI upload token", `\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}\b`, []string{"pypi-AgEIcHlwaS5vcmc"}},
	{"jwt", "JSON Web Token", `\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b`, []string{"eyJ"}},
	{"azure-storage-key", "Azure storage account key in a connection string", `AccountKey=[A-Za-z0-9+/]{86}==`, []string{"AccountKey="}},
}

var (
	compileOnce sync.Once
	compiled    []*regexp.Regexp
	keywords    [][][]byte
)

func rules() []*regexp.Regexp {
	compileOnce.Do(func() {
		for _, r := range Rules {
			compiled = append(compiled, regexp.MustCompile(r.pattern))
			var ks [][]byte
			for _, k := range r.keywords {
				ks = append(ks, []byte(k))
			}
			keywords = append(keywords, ks)
		}
	})
	return compiled
}

// Shaped reports whether s holds a credential-shaped string (one Detect
// would find).
func Shaped(s string) bool {
	b := []byte(s)
	for i, re := range rules() {
		if containsAny(b, keywords[i]) && re.Match(b) {
			return true
		}
	}
	return false
}

// Detect returns the credential-shaped strings in b, by position, without
// overlaps (the earliest, then the longest, wins).
func Detect(b []byte) []Finding {
	var all []Finding
	for i, re := range rules() {
		if !containsAny(b, keywords[i]) {
			continue
		}
		for _, m := range re.FindAllIndex(b, -1) {
			all = append(all, Finding{Rule: Rules[i].ID, Start: m[0], End: m[1]})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Start != all[j].Start {
			return all[i].Start < all[j].Start
		}
		return all[i].End > all[j].End
	})
	out := all[:0]
	end := 0
	for _, f := range all {
		if f.Start >= end {
			out = append(out, f)
			end = f.End
		}
	}
	return out
}

func containsAny(b []byte, keys [][]byte) bool {
	for _, k := range keys {
		if bytes.Contains(b, k) {
			return true
		}
	}
	return false
}

// MaskShaped is s with every credential-shaped string in it masked
// (Detect, then Mask).
func MaskShaped(s string) string {
	b := []byte(s)
	return string(Mask(b, Detect(b)))
}

// Mask replaces each finding with [REDACTED:credential:RULE]; findings
// must come from Detect(b).
func Mask(b []byte, findings []Finding) []byte {
	if len(findings) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for _, f := range findings {
		out = append(out, b[prev:f.Start]...)
		out = append(out, "[REDACTED:credential:"+f.Rule+"]"...)
		prev = f.End
	}
	return append(out, b[prev:]...)
}
