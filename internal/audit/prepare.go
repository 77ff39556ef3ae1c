package audit

import (
	"encoding/json"
	"maps"
	"time"
	"unicode/utf8"
)

// prepare returns the copy of r that the store keeps: Time valid and UTC,
// store-assigned fields cleared, every string and raw JSON field passed
// through redact, Payload dropped unless kept, and no slice or map shared
// with the caller (who may reuse them after Add returns).
func prepare(r Record, redact func(string) string, keepPayload bool) *Record {
	// Zero, or outside the years int64 nanoseconds can hold (the time_ns
	// column): the time of Add.
	if y := r.Time.Year(); r.Time.IsZero() || y < 1678 || y > 2261 {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	r.Seq, r.PrevHash, r.Hash = 0, "", ""
	for _, p := range []*string{
		&r.Event, &r.Client, &r.Session, &r.Sandbox, &r.Workspace, &r.Server,
		&r.Tool, &r.Name, &r.Category, &r.Decision, &r.Rule, &r.Approver, &r.Outcome,
		&r.ExitStatus, &r.Error,
	} {
		*p = redact(*p)
	}
	r.ArgShape = redactJSON(r.ArgShape, redact, 0)
	if keepPayload {
		r.Payload = redactJSON(r.Payload, redact, PayloadLimit)
	} else {
		r.Payload = nil
	}
	r.Files = redactFiles(r.Files, redact)
	r.Domains = redactDomains(r.Domains, redact)
	r.Packages = redactPackages(r.Packages, redact)
	r.Artifacts = redactStrings(r.Artifacts, redact)
	r.Findings = redactStrings(r.Findings, redact)
	r.Argv = redactStrings(r.Argv, redact)
	r.Detail = redactDetail(r.Detail, redact)
	return &r
}

func identity(s string) string { return s }

// redactJSON redacts raw JSON as text. The result must still be JSON (or
// the record could not be encoded and would be lost), so anything that is
// not becomes a JSON string of the redacted text. A limit above zero caps
// the result with a truncation marker.
func redactJSON(raw json.RawMessage, redact func(string) string, limit int) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	s := redact(string(raw))
	out := json.RawMessage(s)
	if !json.Valid(out) {
		out, _ = json.Marshal(s) // a string cannot fail to encode
	}
	if limit > 0 && len(out) > limit {
		return truncated(s, limit)
	}
	return out
}

// truncated is the marker that replaces an over-long payload: its size and
// as much of its (already redacted) head as fits in limit bytes.
func truncated(s string, limit int) json.RawMessage {
	type marker struct {
		Truncated bool   `json:"truncated"`
		Size      int    `json:"size"`
		Head      string `json:"head"`
	}
	head := s[:min(len(s), limit)]
	for {
		head = trimPartialRune(head)
		b, _ := json.Marshal(marker{true, len(s), head})
		if len(b) <= limit {
			return b
		}
		// Escaping grew it; cut by the excess and try again.
		head = head[:max(0, len(head)-(len(b)-limit))]
	}
}

func redactStrings(in []string, redact func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = redact(s)
	}
	return out
}

func redactDetail(in map[string]string, redact func(string) string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range maps.All(in) {
		out[redact(k)] = redact(v)
	}
	return out
}

func redactFiles(in []File, redact func(string) string) []File {
	if in == nil {
		return nil
	}
	out := make([]File, len(in))
	for i, f := range in {
		f.Path, f.SHA256 = redact(f.Path), redact(f.SHA256)
		out[i] = f
	}
	return out
}

func redactDomains(in []Domain, redact func(string) string) []Domain {
	if in == nil {
		return nil
	}
	out := make([]Domain, len(in))
	for i, d := range in {
		d.Host, d.Decision = redact(d.Host), redact(d.Decision)
		out[i] = d
	}
	return out
}

func redactPackages(in []Package, redact func(string) string) []Package {
	if in == nil {
		return nil
	}
	out := make([]Package, len(in))
	for i, p := range in {
		p.Name, p.Version, p.Host = redact(p.Name), redact(p.Version), redact(p.Host)
		out[i] = p
	}
	return out
}

// trimPartialRune drops a rune cut in half at the end of s.
func trimPartialRune(s string) string {
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
