package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
)

// listTimeout bounds starting one server and listing its definitions.
const listTimeout = 2 * time.Minute

// ListOptions are the servers whose definitions a Lister reads (`mcpbox
// pin`). Config and StateDir are required.
type ListOptions struct {
	Config *config.Config
	// ConfigPath is the config file; "" for the embedded default.
	ConfigPath string
	// Base is the directory the config's relative paths lead from.
	Base string
	// StateDir is the state dir, as specconv.StateDir found it.
	StateDir string
	// Stderr gets the log and the servers' stderr; nil: discarded.
	Stderr io.Writer
	// LogLevel is the log's threshold; zero: info.
	LogLevel slog.Level
	// Version is what the gateway tells the servers it is.
	Version string
	// Only, if not empty, names the servers to start: the others' images
	// and packages are neither pulled nor installed (pin SERVER).
	Only []string
	// NoRecord leaves the lock file's image and package pins as they are
	// (pin --check, update --check): an image or package not pinned yet is
	// pulled or installed but not pinned, and a config's own lock file is
	// not made.
	NoRecord bool
	// packages, if set, are the installed packages of the config's package
	// servers (mcpbox update's new one), installed by the caller.
	packages map[string]specconv.Package
}

// Lister starts a config's servers, as serve would (with the same
// protected paths) but without a guard, to read their definitions.
type Lister struct {
	gw    *gateway.Gateway
	kubes *kubeSetup // the kubernetes servers' registrations
	// failed are the servers whose package did not install, with why:
	// their Definitions are that error.
	failed map[string]error
	lock   string // the lock file, as ListOptions.lockPath found it
	// drift are the packages and images that NoRecord left unpinned.
	drift *[]string
	book  *redact.Book // the servers' secrets and the keys in their URLs
}

// Drift says, a line each, which packages and images the lock does not
// pin as the config now asks for them (a changed version or image, one
// never pinned): what pin would record. Only with NoRecord, and for
// images only those of the servers started so far (Definitions).
func (l *Lister) Drift() []string { return *l.drift }

// LockPath is the lock file whose pins the config has: its own, or with
// NoRecord the one that it starts from while it has none.
func (l *Lister) LockPath() string { return l.lock }

// NewLister builds the servers' launchers and a gateway over them; no
// server starts yet. A config whose servers cannot be built is a
// *ConfigError.
func NewLister(o ListOptions) (*Lister, error) { return newLister(o, nil) }

// stateDirFlag is the --state-dir that finds o.StateDir given the config
// (a hint to log in must name it), or "" if the config alone finds it.
func (o ListOptions) stateDirFlag() string {
	if dir, err := specconv.StateDir(o.Config, o.ConfigPath, o.Base, ""); err == nil && dir == o.StateDir {
		return ""
	}
	return o.StateDir
}

// lockPath is the lock file holding the config's pins: with NoRecord the
// one they are read from, which the config's own lock starts from while
// it does not exist yet (a check makes no file).
func (o ListOptions) lockPath() (string, error) {
	if o.NoRecord {
		return guard.LockToRead(o.ConfigPath, o.StateDir)
	}
	return guard.LockPath(o.ConfigPath, o.StateDir)
}

// newLister is NewLister with a change to the wiring (nil: none).
func newLister(o ListOptions, change func(*wiring)) (*Lister, error) {
	if err := checkPlatform(o.Config, goos); err != nil {
		return nil, err
	}
	book := &redact.Book{}
	log := newLogger(o.Stderr, o.LogLevel, book)
	if err := learnURLKeys(book, o.Config); err != nil { // as serve does: errors name the URL
		return nil, configError(err)
	}
	lockPath, err := o.lockPath()
	if err != nil {
		return nil, err
	}
	full := o.Config // its files are protected all the same
	if len(o.Only) > 0 {
		others := map[string]error{}
		for _, s := range o.Config.Servers {
			if !slices.Contains(o.Only, s.Name) {
				others[s.Name] = errNotAsked
			}
		}
		o.Config = withoutServers(o.Config, others)
	}
	pkgs, c := o.packages, o.Config
	var failed map[string]error
	drift := new([]string)
	if pkgs == nil {
		var err error
		if pkgs, failed, *drift, err = listerPackages(o, lockPath, log); err != nil {
			return nil, err
		}
		if len(failed) > 0 {
			if c = withoutServers(o.Config, failed); len(c.Servers) == 0 {
				var errs []error
				for _, s := range o.Config.Servers {
					errs = append(errs, failed[s.Name])
				}
				return nil, errors.Join(errs...)
			}
		}
	}
	w := wiring{
		c: c, log: log, book: book, stderr: o.Stderr,
		loginFlags: func(agent string) string { return loginFlags(o.ConfigPath, o.stateDirFlag(), agent) },
		opts: specconv.Options{Base: o.Base, StateDir: o.StateDir, Packages: pkgs,
			Protected: specconv.ProtectedFiles(full, o.Base, o.ConfigPath, lockPath)},
		images: imageSetup{stateDir: o.StateDir, lockPath: lockPath, stderr: o.Stderr, noRecord: o.NoRecord, drift: drift},
		kubes:  newKubeSetup(o.Base, o.StateDir, log),
	}
	if change != nil {
		change(&w)
	}
	servers, err := w.servers()
	if err != nil {
		w.kubes.close()
		return nil, configError(err)
	}
	gw, err := gateway.New(servers, gateway.Options{Logger: log, Version: o.Version,
		Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}})
	if err != nil {
		w.kubes.close()
		return nil, configError(err)
	}
	return &Lister{gw: gw, kubes: w.kubes, failed: failed, lock: lockPath, drift: drift, book: book}, nil
}

// errNotAsked drops the servers ListOptions.Only does not name.
var errNotAsked = errors.New("not asked for")

// withoutServers is c without the servers in drop, each other server
// keeping the prefix it has in c (a config of one server has none).
func withoutServers(c *config.Config, drop map[string]error) *config.Config {
	cc := *c
	cc.Servers = nil
	for _, s := range c.Servers {
		if drop[s.Name] != nil {
			continue
		}
		sc := *s
		if sc.Prefix == nil {
			p := c.EffectivePrefix(s)
			sc.Prefix = &p
		}
		cc.Servers = append(cc.Servers, &sc)
	}
	return &cc
}

// Definitions starts server (as the local agent's) and returns its tools,
// prompts, resource templates and instructions, redacted; it gives up
// after two minutes.
func (l *Lister) Definitions(ctx context.Context, server string) (*gateway.Definitions, error) {
	if err := l.failed[server]; err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	defs, err := l.gw.Definitions(ctx, server, gateway.Scope{Agent: gateway.LocalAgent})
	if err != nil {
		err = redactedError{err: err, msg: l.book.String(err.Error())}
	}
	return defs, err
}

// redactedError is err, whose text may quote a URL with a key in it or
// a secret, with that text redacted; errors.Is and As still see err.
type redactedError struct {
	err error
	msg string
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Close stops every server the Lister started.
func (l *Lister) Close() {
	l.gw.Close()
	l.kubes.close() // after the gateway stopped the pods
}

// PinListKinds are the lists `mcpbox pin` scans and pins, in the order
// it reports them.
var PinListKinds = []string{gateway.KindTools, gateway.KindPrompts, gateway.KindTemplates, gateway.KindInstructions}

// Finding is a scanner finding on one definition of a server.
type Finding struct {
	Server string
	Kind   string // the pin kind (guard.PinKind)
	Key    string
	integrity.Finding
}

// Scan runs the description scanner over the definitions of each server
// of c that has some in defs, in the config's order. A tool named like
// another server's (bare or prefixed) is a finding too.
func Scan(c *config.Config, defs map[string]*gateway.Definitions) []Finding {
	var out []Finding
	for _, s := range c.Servers {
		d := defs[s.Name]
		if d == nil {
			continue
		}
		var others []string
		for name, o := range defs {
			if name == s.Name {
				continue
			}
			for _, it := range o.Lists[gateway.KindTools] {
				others = append(others, it.Key, c.EffectivePrefix(c.Server(name))+it.Key)
			}
		}
		for _, kind := range PinListKinds {
			for _, it := range d.Lists[kind] {
				for _, f := range integrity.ScanDefinition(guard.PinKind(kind), it.Raw, others) {
					out = append(out, Finding{Server: s.Name, Kind: guard.PinKind(kind), Key: it.Key, Finding: f})
				}
			}
		}
	}
	return out
}

// Comparison is how one kind of a server's definitions compares with the
// lock file.
type Comparison struct {
	Server string
	Kind   string // the pin kind
	// Err: the lock file could not be checked for this kind.
	Err error
	// Changed are the definitions that changed, appeared or went since
	// they were pinned.
	Changed []integrity.Change
	// NotPinned counts the definitions of a kind the lock does not have.
	NotPinned int
}

// Compare checks the definitions of each server of c that has some in
// defs against pins, kind by kind, recording nothing. A server with
// pinning off (a builtin one, by default) has nothing to compare: serve
// does not check its definitions either.
func Compare(c *config.Config, pins *integrity.Pins, defs map[string]*gateway.Definitions) []Comparison {
	var out []Comparison
	for _, s := range c.Servers {
		d := defs[s.Name]
		if d == nil || s.PinMode() == config.PinOff {
			continue
		}
		out = append(out, compareServer(pins, s.Name, d)...)
	}
	return out
}

// compareServer is Compare for server's definitions d.
func compareServer(pins *integrity.Pins, server string, d *gateway.Definitions) []Comparison {
	var out []Comparison
	for _, kind := range PinListKinds {
		var items []integrity.Item
		for _, it := range d.Lists[kind] {
			items = append(items, integrity.Item{Key: it.Key, Raw: it.Raw})
		}
		cmp := Comparison{Server: server, Kind: guard.PinKind(kind)}
		// enforce never writes: a server with no pins is "quarantined".
		_, changes, err := pins.Check(server, integrity.ModeEnforce, cmp.Kind, items)
		cmp.Err = err
		for _, ch := range changes {
			if ch.Status == integrity.StatusQuarantined {
				cmp.NotPinned++
			} else {
				cmp.Changed = append(cmp.Changed, ch)
			}
		}
		out = append(out, cmp)
	}
	return out
}

// replaced says what pinning d replaces of server's earlier pins, for
// pin's line: "; it replaces the lock's: 13 new, 1 changed, 2 removed"
// (instructions count as one), or "" when nothing changes or the lock
// had none. pin records what the server offers now without a review, as
// asked; the line keeps that from passing unseen (pin --check and
// update --check show each change first).
func replaced(pins *integrity.Pins, server string, d *gateway.Definitions) string {
	counts := map[string]int{}
	for _, cmp := range compareServer(pins, server, d) {
		for _, ch := range cmp.Changed {
			counts[ch.Status]++
		}
	}
	var parts []string
	for _, st := range []string{integrity.StatusNew, integrity.StatusChanged, integrity.StatusRemoved} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; it replaces the lock's: " + strings.Join(parts, ", ") + " (mcpbox pin --check shows each before pinning)"
}

// RecordAll is mcpbox pin's recording: it pins the definitions in defs of
// each server of names (in that order; one not in defs could not start),
// writing a line to w for each, and returns how many it pinned. A server
// with pinning off (a builtin one, by default) is not pinned, and w says
// so: serve does not check its definitions, and "pinned" would say it did.
func RecordAll(w io.Writer, c *config.Config, pins *integrity.Pins, names []string, defs map[string]*gateway.Definitions) (int, error) {
	n := 0
	for _, name := range names {
		d, s := defs[name], c.Server(name)
		switch {
		case d == nil:
			continue
		case s != nil && s.PinMode() == config.PinOff:
			fmt.Fprintf(w, "not pinned %s: pinning is off for it (pin: off, a builtin server's default), so serve checks none of its definitions\n", name)
			continue
		}
		was := replaced(pins, name, d)
		if err := Record(pins, name, d); err != nil {
			return n, fmt.Errorf("server %s: %w", name, err)
		}
		n++
		fmt.Fprintf(w, "pinned %s: %d tools, %d prompts, %d templates, %d instructions%s\n", name,
			len(d.Lists[gateway.KindTools]), len(d.Lists[gateway.KindPrompts]), len(d.Lists[gateway.KindTemplates]),
			len(d.Lists[gateway.KindInstructions]), was)
	}
	return n, nil
}

// Record pins server's definitions d in pins, replacing its earlier pins.
func Record(pins *integrity.Pins, server string, d *gateway.Definitions) error {
	lists := map[string][]integrity.Item{}
	for kind, items := range d.Lists {
		k := guard.PinKind(kind)
		for _, it := range items {
			lists[k] = append(lists[k], integrity.Item{Key: it.Key, Raw: it.Raw})
		}
		if lists[k] == nil {
			lists[k] = []integrity.Item{}
		}
	}
	return pins.Record(server, serverInfo(d.ServerInfo), lists)
}

// serverInfo reads name and version from a serverInfo object.
func serverInfo(raw json.RawMessage) integrity.ServerInfo {
	var si integrity.ServerInfo
	var v struct{ Name, Version string }
	if json.Unmarshal(raw, &v) == nil {
		si.Name, si.Version = v.Name, v.Version
	}
	return si
}
