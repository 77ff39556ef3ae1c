package landlock

import "fmt"

// Rule grants Access beneath Path: to Path itself and, for a directory,
// everything below it. Path must exist when the policy is applied; symbolic
// links in it are followed. On a non-directory only file rights (Execute,
// WriteFile, ReadFile, Truncate, IoctlDev, ResolveUnix) apply; the others
// are dropped from the rule.
type Rule struct {
	Path   string
	Access Access
}

// NetPolicy restricts TCP (Landlock ABI 4 and later). Binding to or
// connecting to any port not listed is denied; empty lists deny all TCP
// binds and connects. UDP and unix sockets are not affected.
type NetPolicy struct {
	BindTCP    []uint16
	ConnectTCP []uint16
}

// Policy is a Landlock domain. Every filesystem right the running ABI knows
// is handled, so the zero Policy denies all filesystem access beyond what
// was already open.
type Policy struct {
	Rules []Rule

	// ScopeSignals and ScopeAbstractUnix request ABI>=6 scoping: a
	// restricted process cannot signal, or connect to an abstract unix
	// socket of, a process outside its domain. They are ignored on lower
	// ABIs; Unenforced reports it.
	ScopeSignals, ScopeAbstractUnix bool

	// Net, if non-nil, restricts TCP on ABI>=4 (ignored below; Unenforced
	// reports it). If nil, TCP is left to the network namespace.
	Net *NetPolicy
}

// Unenforced describes, one short sentence each, what p asks for or what the
// package would restrict that the given ABI cannot enforce. An empty result
// means the policy is applied in full. abi 0 means Landlock is unavailable.
func (p Policy) Unenforced(abi int) []string {
	if abi <= 0 {
		return []string{"landlock is unavailable: no filesystem restriction"}
	}
	var notes []string
	add := func(minABI int, what string) {
		if abi < minABI {
			notes = append(notes, fmt.Sprintf("%s needs landlock ABI %d (have %d)", what, minABI, abi))
		}
	}
	add(2, "allowing links and renames across directories")
	add(3, "restricting truncate")
	if p.Net != nil {
		add(4, "restricting TCP bind and connect")
	}
	add(5, "restricting device ioctls")
	if p.ScopeSignals {
		add(6, "scoping signals")
	}
	if p.ScopeAbstractUnix {
		add(6, "scoping abstract unix sockets")
	}
	add(9, "restricting connects to pathname unix sockets")
	return notes
}
