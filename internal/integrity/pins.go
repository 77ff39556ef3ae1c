package integrity

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// Pin modes, the values of a server's `pin:` key. The empty string means
// ModeTOFU.
const (
	// ModeEnforce shows only pinned definitions; a server or kind with no
	// pins at all is quarantined until a human trusts it.
	ModeEnforce = "enforce"
	// ModeTOFU pins a server's kind on first sight, then hides new and
	// changed definitions until trusted.
	ModeTOFU = "tofu"
	// ModeWarn pins on first sight like ModeTOFU but hides nothing; the
	// differences are only reported.
	ModeWarn = "warn"
	// ModeOff neither checks nor records anything.
	ModeOff = "off"
)

// Change statuses.
const (
	StatusNew         = "new"         // not in the lock; hidden (tofu, enforce)
	StatusChanged     = "changed"     // differs from its pin; hidden (tofu, enforce)
	StatusPinned      = "pinned"      // pinned on first sight just now
	StatusQuarantined = "quarantined" // enforce, and nothing of this kind was ever pinned
	StatusRemoved     = "removed"     // pinned but no longer offered; informational
	StatusVersion     = "version"     // serverInfo differs from the lock; never blocks
)

// KindServer is the Kind of a Change about serverInfo.
const KindServer = "server"

// Item is one entry of a server's list.
type Item struct {
	// Key is the tool or prompt name, or the template's uriTemplate. It
	// must equal that member of Raw: a pin is filed under it.
	Key string
	// Raw is the server's list entry, as received.
	Raw json.RawMessage
}

// Change is one difference between a server's list and the lock.
type Change struct {
	Server, Kind, Key string          // Kind is KindServer for serverInfo
	Status            string          // one of the Status constants
	OldHash, NewHash  string          // "" when that side is absent
	Old, New          json.RawMessage // canonical; nil when absent
}

// Pins is the gateway's live view of one lock file. It is safe for
// concurrent use, and several processes may write the same file: each
// write happens under an exclusive flock on PATH.flock, after re-reading
// the file, so no writer loses another's pins.
type Pins struct {
	path string

	mu sync.Mutex
	// lock is the file's content as last read or written, and read the
	// file as it was then (nil if missing). guarded by mu
	lock *Lock
	read os.FileInfo
	// pending holds the latest unapproved changes per server and kind.
	// guarded by mu
	pending map[scope]map[string]Change
	// seen is the serverInfo each server reported (SetInfo). guarded by mu
	seen map[string]ServerInfo
	// had are the servers and kinds that had pins at some point in this
	// process. A file that later lacks them (replaced by a checkout of
	// an older branch, say) does not make Check pin what the server
	// offers now on first use: that would let a rug-pulled definition,
	// hidden while it waited for trust, through unreviewed. guarded by mu
	had map[scope]bool
}

// setLock makes l, read from the file as fi describes it, the pins in
// force, and notes which servers and kinds have pins.
//
// Preconditions: p.mu held, or p not yet shared.
func (p *Pins) setLock(l *Lock, fi os.FileInfo) {
	p.lock, p.read = l, fi
	for name, s := range l.Servers {
		for _, k := range pinKinds {
			if s.pins(k) != nil {
				p.had[scope{name, k}] = true
			}
		}
	}
}

type scope struct{ server, kind string }

// OpenPins reads the lock file at path (missing: empty).
func OpenPins(path string) (*Pins, error) {
	fi, _ := os.Stat(path) // before reading: a write in between is read again
	l, err := ReadLock(path)
	if err != nil {
		return nil, err
	}
	p := &Pins{path: path, pending: map[scope]map[string]Change{}, seen: map[string]ServerInfo{}, had: map[scope]bool{}}
	p.setLock(l, fi)
	return p, nil
}

// Path returns the lock file's path.
func (p *Pins) Path() string { return p.path }

// SetInfo remembers the serverInfo server reported. It is written with
// the next write of that server's pins; until then Check reports a
// difference from the lock as a Change of Kind KindServer and Status
// StatusVersion, which never hides anything.
func (p *Pins) SetInfo(server string, info ServerInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[server] = info
}

// Reload re-reads the file, after `mcpbox pin` or `mcpbox trust` wrote it
// from another process. On error the previous pins stay in force.
func (p *Pins) Reload() error {
	fi, _ := os.Stat(p.path)
	l, err := ReadLock(p.path)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLock(l, fi)
	p.prunePending()
	return nil
}

// fresh re-reads the file if another writer replaced it since it was
// read or written here (another gateway's trust, from its dashboard;
// mcpbox pin; a checkout), so that what is pending here, and what this
// gateway hides, follow it. Writers replace the file (a rename), so a
// new file or another size or time says it changed. On error the pins
// in memory stay, as with Reload.
//
// Preconditions: p.mu held.
func (p *Pins) fresh() {
	fi, err := os.Stat(p.path)
	if err != nil || p.read != nil && os.SameFile(p.read, fi) && fi.Size() == p.read.Size() && fi.ModTime().Equal(p.read.ModTime()) {
		return
	}
	l, err := ReadLock(p.path)
	if err != nil {
		return
	}
	p.setLock(l, fi)
	p.prunePending()
}

// Check compares server's current list of one kind with the lock under
// mode and returns the items the client may see and the differences.
//
//   - off: all visible, nothing recorded.
//   - warn: all visible; on first sight (no pins of this kind) the items
//     are pinned, later differences are returned and kept pending, so a
//     Trust silences them.
//   - tofu (or ""): on first sight all items are pinned and the file
//     written (Status "pinned"); later, new and changed items are hidden
//     and kept pending until trusted.
//   - enforce: like tofu, but on first sight nothing is visible and every
//     item is pending as "quarantined".
//
// Pinned items the server no longer offers are reported as "removed".
// Each call replaces the pending state of the items it lists (see
// setPending for the others). An item whose
// definition cannot be pinned (too large, duplicate keys, key not its
// name) or two items with one key fail the whole list: the caller must
// then show nothing.
func (p *Pins) Check(server, mode, kind string, items []Item) (visible []Item, changes []Change, err error) {
	if mode, err = checkArgs(mode, kind); err != nil {
		return nil, nil, err
	}
	sc := scope{server, kind}
	if mode == ModeOff {
		p.mu.Lock()
		delete(p.pending, sc)
		p.mu.Unlock()
		return items, nil, nil
	}
	cur, err := itemPins(server, kind, items)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fresh()
	if p.pinsOf(server, kind) == nil && mode != ModeEnforce && !p.had[sc] {
		if changes, err = p.pinFirst(server, kind, items, cur); err != nil {
			return nil, nil, err
		}
		if changes != nil {
			return items, p.withVersion(server, changes), nil
		}
	}
	visible, changes, pend := compare(server, kind, p.pinsOf(server, kind), items, cur)
	if mode == ModeWarn {
		visible = items
	}
	p.setPending(sc, items, pend)
	return visible, p.withVersion(server, changes), nil
}

// maxPending and maxPendingBytes bound the pending changes kept of one
// server and kind, in number and in the bytes of their definitions (as
// much as one list may hold: gateway's listBytes).
const (
	maxPending      = 1024
	maxPendingBytes = 32 << 20
)

// setPending records what one list found pending. The items listed
// replace their pending state; the others keep theirs, because a server
// may list different items to different clients (by the capabilities
// each declared), and a change one client saw stays pending, and can be
// trusted, after another client listed without it. Past maxPending or
// maxPendingBytes (a server churning names or sending large
// definitions) only this list's changes are kept.
//
// Preconditions: p.mu held.
func (p *Pins) setPending(sc scope, items []Item, pend map[string]Change) {
	m := p.pending[sc]
	for _, it := range items {
		delete(m, it.Key)
	}
	if len(m)+len(pend) > maxPending || pendingBytes(m)+pendingBytes(pend) > maxPendingBytes {
		m = nil
	}
	if m == nil {
		p.pending[sc] = pend
		return
	}
	maps.Copy(m, pend)
}

// pendingBytes is the size of the definitions m holds.
func pendingBytes(m map[string]Change) int {
	n := 0
	for _, c := range m {
		n += len(c.New) + len(c.Old)
	}
	return n
}

// compare sorts items into visible ones and changes against pins (nil:
// nothing of this kind pinned, so everything is quarantined).
func compare(server, kind string, pins map[string]Pin, items []Item, cur []Pin) ([]Item, []Change, map[string]Change) {
	var visible []Item
	var changes []Change
	pend := map[string]Change{}
	for i, it := range items {
		old, ok := pins[it.Key]
		if ok && old.SHA256 == cur[i].SHA256 {
			visible = append(visible, it)
			continue
		}
		c := Change{Server: server, Kind: kind, Key: it.Key, NewHash: cur[i].SHA256, New: cur[i].Definition}
		switch {
		case pins == nil:
			c.Status = StatusQuarantined
		case ok:
			c.Status, c.OldHash, c.Old = StatusChanged, old.SHA256, old.Definition
		default:
			c.Status = StatusNew
		}
		changes = append(changes, c)
		pend[it.Key] = c
	}
	offered := make(map[string]bool, len(items))
	for _, it := range items {
		offered[it.Key] = true
	}
	for key, old := range pins {
		if !offered[key] {
			changes = append(changes, Change{Server: server, Kind: kind, Key: key, Status: StatusRemoved, OldHash: old.SHA256, Old: old.Definition})
		}
	}
	sortChanges(changes)
	return visible, changes, pend
}

// pinFirst pins all items of a kind seen for the first time. If another
// process pinned that kind meanwhile, nothing is written and it returns
// nil changes: the caller compares against the fresh pins.
//
// Preconditions: p.mu held.
func (p *Pins) pinFirst(server, kind string, items []Item, cur []Pin) ([]Change, error) {
	var changes []Change
	err := p.update(server, func(s *ServerLock) bool {
		if s.pins(kind) != nil {
			return false
		}
		m := make(map[string]Pin, len(items))
		changes = []Change{}
		for i, it := range items {
			m[it.Key] = cur[i]
			changes = append(changes, Change{Server: server, Kind: kind, Key: it.Key, Status: StatusPinned, NewHash: cur[i].SHA256, New: cur[i].Definition})
		}
		s.setPins(kind, m)
		return true
	})
	if err != nil {
		return nil, err
	}
	delete(p.pending, scope{server, kind})
	sortChanges(changes)
	return changes, nil
}

// Verify is Check for one item at call time, with its current definition.
// ok false means the call must be refused; reason says why in a short
// sentence fit for the client. In warn mode ok is true and reason, if not
// empty, describes the difference. A refused new or changed item becomes
// pending, so it can be trusted without another list.
func (p *Pins) Verify(server, mode, kind string, it Item) (ok bool, reason string, err error) {
	if mode, err = checkArgs(mode, kind); err != nil {
		return false, "", err
	}
	if mode == ModeOff {
		return true, "", nil
	}
	cur, err := itemPin(kind, it)
	if err != nil {
		return false, fmt.Sprintf("%s %q has a definition that cannot be pinned", kind, it.Key), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pins := p.pinsOf(server, kind)
	old, pinned := pins[it.Key]
	c := Change{Server: server, Kind: kind, Key: it.Key, NewHash: cur.SHA256, New: cur.Definition}
	switch {
	case pinned && old.SHA256 == cur.SHA256:
		return true, "", nil
	case pins == nil && mode == ModeEnforce:
		c.Status, reason = StatusQuarantined, fmt.Sprintf("server %q is quarantined: none of its %ss are trusted", server, kind)
	case pins == nil:
		reason = fmt.Sprintf("%s %q is not pinned yet: list the %ss first", kind, it.Key, kind)
	case pinned:
		c.Status, c.OldHash, c.Old = StatusChanged, old.SHA256, old.Definition
		reason = fmt.Sprintf("%s %q changed since it was pinned; run mcpbox trust to accept", kind, it.Key)
	default:
		c.Status, reason = StatusNew, fmt.Sprintf("%s %q is not pinned; run mcpbox trust to accept", kind, it.Key)
	}
	if c.Status != "" {
		p.addPending(c)
	}
	return mode == ModeWarn, reason, nil
}

// Pending returns the latest unapproved changes seen by Check and Verify
// for server ("" for all servers), sorted by server, kind and key.
func (p *Pins) Pending(server string) []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fresh()
	var out []Change
	for sc, m := range p.pending {
		if server != "" && sc.server != server {
			continue
		}
		for _, c := range m {
			out = append(out, c)
		}
	}
	sortChanges(out)
	return out
}

// Trust pins pending definitions of server and writes the lock. key is ""
// for everything pending, a tool name, or a kind-qualified key
// "tool:NAME", "prompt:NAME" or "template:URI" (a tool whose name starts
// with "prompt:" is written "tool:prompt:..."). It returns what it
// pinned; a key with nothing pending is an error wrapping ErrNotPending.
//
// want, if not nil, lists the NewHash of every change the caller showed a
// human: a pending change with another hash (the server changed it again
// since) is an error wrapping ErrChanged, and nothing is trusted.
func (p *Pins) Trust(server, key string, want []string) ([]Change, error) {
	kind, name := ParseTrustKey(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fresh()
	var trusted []Change
	for sc, m := range p.pending {
		if sc.server != server || (kind != "" && sc.kind != kind) {
			continue
		}
		for k, c := range m {
			if key == "" || k == name {
				trusted = append(trusted, c)
			}
		}
	}
	for _, c := range trusted {
		if want != nil && !slices.Contains(want, c.NewHash) {
			return nil, fmt.Errorf("trusting %s %q of server %q: %w", c.Kind, c.Key, server, ErrChanged)
		}
	}
	if len(trusted) == 0 {
		if key == "" {
			return nil, nil
		}
		return nil, fmt.Errorf("trusting %s %q of server %q: %w", cmp.Or(kind, KindTool), name, server, ErrNotPending)
	}
	err := p.update(server, func(s *ServerLock) bool {
		for _, c := range trusted {
			m := s.pins(c.Kind)
			if m == nil {
				m = map[string]Pin{}
				s.setPins(c.Kind, m)
			}
			m[c.Key] = Pin{SHA256: c.NewHash, Definition: c.New}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	sortChanges(trusted)
	return trusted, nil
}

// ParseTrustKey splits a Trust key into kind ("" with an empty key) and
// name.
func ParseTrustKey(key string) (kind, name string) {
	if key == "" {
		return "", ""
	}
	for _, k := range pinKinds {
		if rest, ok := strings.CutPrefix(key, k+":"); ok {
			return k, rest
		}
	}
	return KindTool, key
}

// TrustKey is the Trust key of the definition kind, key: the tool's
// name, or KIND:KEY for the other kinds and for a tool whose name starts
// like one ("tool:prompt:x"), so that ParseTrustKey gives them back.
func TrustKey(kind, key string) string {
	if k, _ := ParseTrustKey(key); kind == KindTool && k == KindTool && !strings.HasPrefix(key, KindTool+":") {
		return key
	}
	return kind + ":" + key
}

// Record replaces server's pins with lists (kind to items), as `mcpbox pin`
// does after listing a server; kinds absent from lists keep their pins.
// The lists are pinned whole: nothing is hidden or reported.
func (p *Pins) Record(server string, info ServerInfo, lists map[string][]Item) error {
	cur := make(map[string][]Pin, len(lists))
	for kind, items := range lists {
		if _, err := checkArgs(ModeTOFU, kind); err != nil {
			return err
		}
		pins, err := itemPins(server, kind, items)
		if err != nil {
			return err
		}
		cur[kind] = pins
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.update(server, func(s *ServerLock) bool {
		s.Info = info
		for kind, items := range lists {
			m := make(map[string]Pin, len(items))
			for i, it := range items {
				m[it.Key] = cur[kind][i]
			}
			s.setPins(kind, m)
		}
		return true
	})
}

// update re-reads the file under the flock, lets fn change server's lock
// and writes the file if fn returns true. The remembered serverInfo goes
// into every write of that server. Pending changes the fresh file now
// satisfies are dropped.
//
// Preconditions: p.mu held.
func (p *Pins) update(server string, fn func(*ServerLock) bool) error {
	release, err := acquireFlock(p.path + ".flock")
	if err != nil {
		return err
	}
	defer release()
	fi, _ := os.Stat(p.path)
	l, err := ReadLock(p.path)
	if err != nil {
		return err
	}
	s := l.server(server)
	if fn(s) {
		if info, ok := p.seen[server]; ok {
			s.Info = info
		}
		if err := WriteLock(p.path, l); err != nil {
			return err
		}
		fi, _ = os.Stat(p.path) // ours, under the flock
	}
	p.setLock(l, fi)
	p.prunePending()
	return nil
}

// prunePending drops pending changes whose new definition is now pinned.
//
// Preconditions: p.mu held.
func (p *Pins) prunePending() {
	for sc, m := range p.pending {
		pins := p.pinsOf(sc.server, sc.kind)
		for k, c := range m {
			if pin, ok := pins[k]; ok && pin.SHA256 == c.NewHash {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(p.pending, sc)
		}
	}
}

// Preconditions: p.mu held.
func (p *Pins) addPending(c Change) {
	sc := scope{c.Server, c.Kind}
	if p.pending[sc] == nil {
		p.pending[sc] = map[string]Change{}
	}
	p.pending[sc][c.Key] = c
}

// ServerPins counts one server's pins in the lock file.
type ServerPins struct {
	Server       string     `json:"server"`
	Info         ServerInfo `json:"info"` // the serverInfo pinned with them
	Tools        int        `json:"tools"`
	Prompts      int        `json:"prompts"`
	Templates    int        `json:"templates"`
	Instructions int        `json:"instructions"`
}

// Pinned counts the pins of each server in the lock file, by name, as
// the file holds them now: first-use pins of this process and of others,
// `mcpbox pin`'s and trusts alike.
func (p *Pins) Pinned() []ServerPins {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fresh()
	out := make([]ServerPins, 0, len(p.lock.Servers))
	for name, s := range p.lock.Servers {
		if s == nil {
			continue
		}
		out = append(out, ServerPins{Server: name, Info: s.Info, Tools: len(s.Tools), Prompts: len(s.Prompts),
			Templates: len(s.Templates), Instructions: len(s.Instructions)})
	}
	slices.SortFunc(out, func(a, b ServerPins) int { return strings.Compare(a.Server, b.Server) })
	return out
}

// pinsOf returns the pins of server and kind (nil: never pinned).
//
// Preconditions: p.mu held.
func (p *Pins) pinsOf(server, kind string) map[string]Pin {
	s := p.lock.Servers[server]
	if s == nil {
		return nil
	}
	return s.pins(kind)
}

// withVersion appends a serverInfo change to changes.
//
// Preconditions: p.mu held.
func (p *Pins) withVersion(server string, changes []Change) []Change {
	seen, ok := p.seen[server]
	s := p.lock.Servers[server]
	if !ok || s == nil || s.Info == (ServerInfo{}) || s.Info == seen {
		return changes
	}
	old, _ := json.Marshal(s.Info)
	cur, _ := json.Marshal(seen)
	return append(changes, Change{Server: server, Kind: KindServer, Key: "serverInfo", Status: StatusVersion, Old: old, New: cur})
}

// checkArgs validates kind and returns mode with "" mapped to ModeTOFU.
func checkArgs(mode, kind string) (string, error) {
	if !kinds[kind] {
		return "", fmt.Errorf("checking pins: %w %q", ErrUnknownKind, kind)
	}
	switch mode {
	case "":
		return ModeTOFU, nil
	case ModeEnforce, ModeTOFU, ModeWarn, ModeOff:
		return mode, nil
	}
	return "", fmt.Errorf("checking pins: %w %q", ErrUnknownMode, mode)
}

// itemPins pins each item, rejecting a list with a key twice.
func itemPins(server, kind string, items []Item) ([]Pin, error) {
	pins := make([]Pin, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if seen[it.Key] {
			return nil, fmt.Errorf("checking server %q %s %q: %w", server, kind, it.Key, ErrDuplicateItem)
		}
		seen[it.Key] = true
		pin, err := itemPin(kind, it)
		if err != nil {
			return nil, fmt.Errorf("checking server %q: %w", server, err)
		}
		pins[i] = pin
	}
	return pins, nil
}

func itemPin(kind string, it Item) (Pin, error) {
	pin, name, err := newPinKey(kind, it.Raw)
	if err != nil {
		return Pin{}, fmt.Errorf("%s %q: %w", kind, it.Key, err)
	}
	if name != it.Key {
		return Pin{}, fmt.Errorf("%s %q: %w %q", kind, it.Key, ErrKeyMismatch, name)
	}
	return pin, nil
}

func sortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Status, b.Status))
	})
}
