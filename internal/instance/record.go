package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Record describes one running `mcpbox serve`.
type Record struct {
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Project   string    `json:"project"`          // the directory it serves or its config's directory
	Config    string    `json:"config,omitempty"` // the config file; "" for the embedded default
	StateDir  string    `json:"state_dir"`
	Transport string    `json:"transport"`     // stdio, http or stdio+http
	URL       string    `json:"url,omitempty"` // the HTTP endpoint once it listens
	// TokenFile is the file holding the bearer token its HTTP endpoint
	// wants (a config without clients); "" if none. Never the token.
	TokenFile string `json:"token_file,omitempty"`
	// Approvals is the unix socket of its approvals endpoint; "" if none.
	Approvals string `json:"approvals_socket,omitempty"`
	// Unavailable are the servers it could not set up (their package did
	// not install, their image did not pull), by name, with why.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// Socket is the admin socket of the instance.
func (r Record) Socket() string { return SocketPath(r.StateDir, r.PID) }

// Dir is where a state dir keeps its instances' records and sockets.
func Dir(stateDir string) string { return filepath.Join(stateDir, "instances") }

// SocketPath is the admin socket of the instance pid on stateDir.
func SocketPath(stateDir string, pid int) string {
	return filepath.Join(Dir(stateDir), strconv.Itoa(pid)+".sock")
}

func recordPath(stateDir string, pid int) string {
	return filepath.Join(Dir(stateDir), strconv.Itoa(pid)+".json")
}

// MakeDir creates the instances dir of stateDir (mode 0700).
func MakeDir(stateDir string) error {
	if err := os.MkdirAll(Dir(stateDir), 0o700); err != nil {
		return fmt.Errorf("creating instances dir: %w", err)
	}
	return nil
}

// Write writes r's record, replacing an earlier one of the same pid in
// one rename, so a reader never sees half a record.
func Write(r Record) error {
	if err := MakeDir(r.StateDir); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding instance record: %w", err)
	}
	path := recordPath(r.StateDir, r.PID)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing instance record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing instance record: %w", err)
	}
	return nil
}

// Remove removes the record of pid on stateDir, then its socket.
func Remove(stateDir string, pid int) {
	os.Remove(recordPath(stateDir, pid))
	os.Remove(SocketPath(stateDir, pid))
}

// List returns the live instances of stateDir, oldest first. A missing
// state dir has none. Unreadable records are skipped.
func List(stateDir string) ([]Record, error) {
	recs, err := read(stateDir)
	if err != nil {
		return nil, err
	}
	var live []Record
	for _, r := range recs {
		if answers(stateDir, r.Socket()) {
			live = append(live, r)
		}
	}
	return live, nil
}

// answers reports whether an instance of stateDir answers on the socket
// sock: a socket, not a link to one elsewhere (a record planted beside
// a link to a real gateway's socket would pass for that gateway's), on
// which a process Serves admits listens.
func answers(stateDir, sock string) bool {
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket {
		return false
	}
	conn, err := Dial(sock, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	return Serves(conn, stateDir)
}

func read(stateDir string) ([]Record, error) {
	// Listed, not globbed: a state dir's path is the user's (or a
	// config's) and may hold a pattern's metacharacters.
	ents, err := os.ReadDir(Dir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(Dir(stateDir), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(b, &r) != nil || strconv.Itoa(r.PID)+".json" != filepath.Base(p) {
			continue
		}
		// Where the record lies does not decide which socket is dialed.
		r.StateDir = stateDir
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// RemoveStale removes the records and sockets of instances that are gone
// (nothing answers on their socket) and returns their pids. A socket
// without a record is removed only if it is dead too: an instance writes
// its record just after it listens.
func RemoveStale(stateDir string) ([]int, error) {
	ents, err := os.ReadDir(Dir(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	var gone []int
	for _, e := range ents {
		stem, ext, _ := strings.Cut(e.Name(), ".")
		pid, err := strconv.Atoi(stem)
		if err != nil || pid == os.Getpid() || (ext != "sock" && ext != "json") || slices.Contains(gone, pid) {
			continue
		}
		if !Dead(SocketPath(stateDir, pid)) {
			continue
		}
		// The record first, then the instance's other files (its
		// sockets, a half-written record).
		os.Remove(recordPath(stateDir, pid))
		for _, other := range ents {
			if strings.HasPrefix(other.Name(), stem+".") {
				os.Remove(filepath.Join(Dir(stateDir), other.Name()))
			}
		}
		gone = append(gone, pid)
	}
	return gone, nil
}

// Alive reports whether something accepts connections on the socket.
func Alive(sock string) bool {
	conn, err := Dial(sock, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// Dead reports whether the socket is missing or refuses connections: no
// process listens on it. Any other outcome (a timeout) is not dead.
func Dead(sock string) bool {
	conn, err := Dial(sock, time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// Lock takes stateDir's start lock (an flock on instances/start.lock),
// which an instance holds only while it starts: while it removes what
// dead instances left and decides whether it is alone.
func Lock(stateDir string) (unlock func(), err error) {
	if err := MakeDir(stateDir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(Dir(stateDir), "start.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening instances lock: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
