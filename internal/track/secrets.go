package track

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/audit"
)

// secretUse is one substitution of a secret added at the egress proxy.
type secretUse struct {
	at   time.Time
	name string // "NAME@HOST:PORT"
}

// DetailSecrets is the call record's Detail key naming the secrets the
// proxy added to the call's requests: "NAME@HOST:PORT", comma-separated.
const DetailSecrets = "secrets_injected"

// SecretInjected notes that the proxy added secret name to a request to
// host:port at time at, for the record of the call then in flight.
func (s *Sandbox) SecretInjected(name, host string, port int, at time.Time) {
	u := secretUse{at: at, name: fmt.Sprintf("%s@%s:%d", name, host, port)}
	s.mu.Lock()
	if len(s.secrets) >= maxTrackedConns {
		s.secrets = append(s.secrets[:0], s.secrets[len(s.secrets)-maxTrackedConns/2:]...)
	}
	s.secrets = append(s.secrets, u)
	s.mu.Unlock()
}

// secretsDuring adds to rec's Detail the secrets injected between start
// and end. Preconditions: s.mu is held.
func (s *Sandbox) secretsDuring(start, end time.Time, rec *audit.Record) {
	var names []string
	for _, u := range s.secrets {
		if !u.at.Before(start) && !u.at.After(end) && !slices.Contains(names, u.name) {
			names = append(names, u.name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	if rec.Detail == nil {
		rec.Detail = map[string]string{}
	}
	rec.Detail[DetailSecrets] = strings.Join(names, ",")
}
