package integrity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Sentinel errors of pinning. They live here rather than in errors.go,
// which the description scanner owns.
var (
	// ErrUnknownKind rejects a kind other than KindTool, KindPrompt,
	// KindTemplate and KindInstructions.
	ErrUnknownKind = errors.New("unknown definition kind")
	// ErrUnknownMode rejects a pin mode other than the Mode constants.
	ErrUnknownMode = errors.New("unknown pin mode")
	// ErrTooLarge rejects a definition over MaxDefinitionSize.
	ErrTooLarge = errors.New("definition too large")
	// ErrInvalidJSON rejects malformed JSON, invalid UTF-8 and lone
	// surrogates.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrDuplicateKey rejects an object with a key twice: clients
	// disagree on which value wins.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrNotObject rejects a definition that is not a JSON object.
	ErrNotObject = errors.New("definition is not a JSON object")
	// ErrKeyMismatch rejects an item whose key is not its definition's
	// name (uriTemplate for templates).
	ErrKeyMismatch = errors.New("key does not match the definition's name")
	// ErrDuplicateItem rejects a list that offers one key twice.
	ErrDuplicateItem = errors.New("key listed twice")
	// ErrHashMismatch reports a lock file pin whose definition does not
	// hash to its sha256: the file was edited by hand.
	ErrHashMismatch = errors.New("definition does not match its sha256")
	// ErrLockVersion rejects a lock file of another format version.
	ErrLockVersion = errors.New("unsupported lock file version")
	// ErrNotPending rejects a Trust key with no pending change.
	ErrNotPending = errors.New("no pending change")
	// ErrChanged: a pending definition is not the one shown to whoever
	// trusts it (the server changed it again meanwhile).
	ErrChanged = errors.New("the definition changed since it was shown; look at it again")
	// ErrLockBusy reports that another process held the lock file's flock
	// for longer than lockWait.
	ErrLockBusy = errors.New("lock file busy")
)

// LockVersion is the format version written to and accepted from lock
// files.
const LockVersion = 1

// maxLockSize bounds a lock file read: 64 servers of 100 tools at the
// definition limit would not fit, but no real lock comes near it.
const maxLockSize = 256 << 20

// Lock is the content of a lock file.
type Lock struct {
	// Servers maps a server's name in the config to its pins.
	Servers map[string]*ServerLock
	// Images maps a server's name to its image pin (images.go).
	Images map[string]ImagePin
	// Packages maps a server's name to its package pin (packages.go).
	Packages map[string]PackagePin
}

// ServerLock holds one server's pins. A nil map means that kind was never
// pinned (tofu pins it on first sight); an empty map means it was pinned
// while the server offered none, so anything that appears later is new.
type ServerLock struct {
	Info      ServerInfo
	Tools     map[string]Pin
	Prompts   map[string]Pin
	Templates map[string]Pin
	// Instructions holds at most the one item InstructionsKey.
	Instructions map[string]Pin
}

// ServerInfo is the serverInfo a server reported at initialization. It is
// informational: a changed version is reported but never blocks.
type ServerInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Pin is one approved definition. There is no timestamp: the file must be
// byte-identical for the same definitions on every run and machine, and
// version control already says when a pin changed.
type Pin struct {
	SHA256     string          // "sha256:" + hex of Definition
	Definition json.RawMessage // canonical (JCS) JSON
}

// NewPin canonicalizes def and returns its pin.
func NewPin(kind string, def json.RawMessage) (Pin, error) {
	pin, _, err := newPinKey(kind, def)
	return pin, err
}

// newPinKey returns the pin of def and the key its definition names.
func newPinKey(kind string, def []byte) (Pin, string, error) {
	c, key, err := canonicalize(kind, def)
	if err != nil {
		return Pin{}, "", err
	}
	return Pin{SHA256: hashCanonical(c), Definition: c}, key, nil
}

// pins returns the map of kind; kind must be valid.
func (s *ServerLock) pins(kind string) map[string]Pin {
	switch kind {
	case KindTool:
		return s.Tools
	case KindPrompt:
		return s.Prompts
	case KindInstructions:
		return s.Instructions
	}
	return s.Templates
}

func (s *ServerLock) setPins(kind string, m map[string]Pin) {
	switch kind {
	case KindTool:
		s.Tools = m
	case KindPrompt:
		s.Prompts = m
	case KindInstructions:
		s.Instructions = m
	default:
		s.Templates = m
	}
}

// server returns the lock of name, creating it.
func (l *Lock) server(name string) *ServerLock {
	if l.Servers == nil {
		l.Servers = map[string]*ServerLock{}
	}
	s := l.Servers[name]
	if s == nil {
		s = &ServerLock{}
		l.Servers[name] = s
	}
	return s
}

// The file format. Fields are declared in key order so the file's keys
// are sorted at every level (maps are sorted by encoding/json).
type (
	lockFile struct {
		Images   map[string]ImagePin   `json:"images,omitzero"`
		Packages map[string]PackagePin `json:"packages,omitzero"`
		Servers  map[string]serverFile `json:"servers"`
		Version  int                   `json:"version"`
	}
	serverFile struct {
		Info         ServerInfo         `json:"info,omitzero"`
		Instructions map[string]pinFile `json:"instructions,omitzero"`
		Prompts      map[string]pinFile `json:"prompts,omitzero"`
		Templates    map[string]pinFile `json:"templates,omitzero"`
		Tools        map[string]pinFile `json:"tools,omitzero"`
	}
	pinFile struct {
		Definition json.RawMessage `json:"definition"`
		SHA256     string          `json:"sha256"`
	}
)

var pinKinds = []string{KindTool, KindPrompt, KindTemplate, KindInstructions}

// ReadLock reads a lock file. A missing file is an empty lock. Unknown
// fields, duplicate keys, another version and a pin whose definition does
// not hash to its sha256 (or is filed under another name) are errors that
// name the server, kind and key.
func ReadLock(path string) (*Lock, error) {
	f, err := OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Lock{Servers: map[string]*ServerLock{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading lock file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLockSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading lock file %s: %w", path, err)
	}
	if len(data) > maxLockSize {
		return nil, fmt.Errorf("reading lock file %s: larger than %d bytes", path, maxLockSize)
	}
	l, err := parseLock(data)
	if err != nil {
		return nil, fmt.Errorf("reading lock file %s: %w", path, err)
	}
	return l, nil
}

func parseLock(data []byte) (*Lock, error) {
	// The strict strictParser catches duplicate keys that encoding/json would
	// resolve silently.
	if _, err := parseStrict(data); err != nil {
		return nil, err
	}
	var lf lockFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lf); err != nil {
		return nil, err
	}
	if lf.Version != LockVersion {
		return nil, fmt.Errorf("%w %d (want %d)", ErrLockVersion, lf.Version, LockVersion)
	}
	l := &Lock{Servers: make(map[string]*ServerLock, len(lf.Servers))}
	images, err := readImages(lf.Images)
	if err != nil {
		return nil, err
	}
	l.Images = images
	if err := readPackages(l, lf.Packages); err != nil {
		return nil, err
	}
	for name, sf := range lf.Servers {
		s := &ServerLock{Info: sf.Info}
		for kind, m := range map[string]map[string]pinFile{KindTool: sf.Tools, KindPrompt: sf.Prompts, KindTemplate: sf.Templates, KindInstructions: sf.Instructions} {
			pins, err := readPins(name, kind, m)
			if err != nil {
				return nil, err
			}
			s.setPins(kind, pins)
		}
		l.Servers[name] = s
	}
	return l, nil
}

// readPins checks each pin of one server and kind against its hash.
func readPins(server, kind string, m map[string]pinFile) (map[string]Pin, error) {
	if m == nil {
		return nil, nil
	}
	pins := make(map[string]Pin, len(m))
	for key, pf := range m {
		pin, err := checkPin(kind, key, pf.Definition, pf.SHA256)
		if err != nil {
			return nil, fmt.Errorf("server %q %s %q: %w", server, kind, key, err)
		}
		pins[key] = pin
	}
	return pins, nil
}

// checkPin recomputes a stored pin and compares it with its hash and key.
func checkPin(kind, key string, def json.RawMessage, sum string) (Pin, error) {
	pin, name, err := newPinKey(kind, def)
	if err != nil {
		return Pin{}, err
	}
	if pin.SHA256 != sum {
		return Pin{}, ErrHashMismatch
	}
	if name != key {
		return Pin{}, ErrKeyMismatch
	}
	return pin, nil
}

// Marshal returns the lock file bytes: JSON with 2-space indent, sorted
// keys, definitions pretty-printed and a trailing newline. Every pin is
// re-checked first, so a file Marshal writes is one ReadLock accepts.
func (l *Lock) Marshal() ([]byte, error) {
	lf := lockFile{Servers: map[string]serverFile{}, Version: LockVersion, Packages: l.Packages}
	if err := writeImages(&lf, l.Images); err != nil {
		return nil, err
	}
	for name, s := range l.Servers {
		if s == nil {
			continue
		}
		sf := serverFile{Info: s.Info}
		var err error
		if sf.Tools, err = writePins(name, KindTool, s.Tools); err != nil {
			return nil, err
		}
		if sf.Prompts, err = writePins(name, KindPrompt, s.Prompts); err != nil {
			return nil, err
		}
		if sf.Templates, err = writePins(name, KindTemplate, s.Templates); err != nil {
			return nil, err
		}
		if sf.Instructions, err = writePins(name, KindInstructions, s.Instructions); err != nil {
			return nil, err
		}
		lf.Servers[name] = sf
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep descriptions readable: no \u003c for <
	enc.SetIndent("", "  ")
	if err := enc.Encode(lf); err != nil {
		return nil, fmt.Errorf("encoding lock file: %w", err)
	}
	return buf.Bytes(), nil
}

func writePins(server, kind string, pins map[string]Pin) (map[string]pinFile, error) {
	if pins == nil {
		return nil, nil
	}
	m := make(map[string]pinFile, len(pins))
	for key, p := range pins {
		pin, err := checkPin(kind, key, p.Definition, p.SHA256)
		if err != nil {
			return nil, fmt.Errorf("encoding lock file: server %q %s %q: %w", server, kind, key, err)
		}
		m[key] = pinFile{Definition: pin.Definition, SHA256: pin.SHA256}
	}
	return m, nil
}

// WriteLock writes l to path atomically: a temporary file in the same
// directory is written, synced, made mode 0644 and renamed over path, and
// the directory is synced, so a crash leaves the old or the new file.
func WriteLock(path string, l *Lock) (err error) {
	data, err := l.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing lock file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing lock file: %w", err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("writing lock file: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing lock file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing lock file: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing lock file: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing lock file directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing lock file directory: %w", err)
	}
	return nil
}
