package workspace

import "time"

const (
	// SnapshotVersion is the Meta.Version Snapshot writes and the highest
	// Restore reads.
	SnapshotVersion = 1
	// MetaName is the snapshot's first entry, its JSON metadata.
	MetaName = "mcpbox-snapshot.json"
	// maxMetaSize bounds the metadata entry ReadMeta will decode.
	maxMetaSize = 1 << 20
)

// Meta describes a snapshot. Snapshot sets Parts to the sorted part names
// and a zero Version to SnapshotVersion.
type Meta struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	Server  string    `json:"server,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Session string    `json:"session,omitempty"`
	Sandbox string    `json:"sandbox,omitempty"`
	Parts   []string  `json:"parts"`
}

const (
	// DefaultMaxSize is the per-file cap when ArtifactRules.MaxSize is 0.
	DefaultMaxSize = 64 << 20
	// DefaultMaxTotal is the total cap when ArtifactRules.MaxTotal is 0.
	DefaultMaxTotal = 1 << 30
)

// ArtifactRules is the config `artifacts: {dir, include, max_size}`.
type ArtifactRules struct {
	// Include holds globs over slash paths relative to the source: each
	// component is a path.Match pattern and a "**" component matches any
	// number of components ("*.txt" matches top-level files only,
	// "**/*.txt" any). If empty, every file matches.
	Include []string
	// MaxSize caps each file; 0 means DefaultMaxSize.
	MaxSize int64
	// MaxTotal caps the bytes of one Export; 0 means DefaultMaxTotal.
	MaxTotal int64
}

// Exported is a file Export copied.
type Exported struct {
	Path   string // slash path relative to src and dst
	Size   int64
	SHA256 string // hex
}

// Refused is a matching entry Export did not copy.
type Refused struct {
	Path   string // slash path relative to src
	Reason string // one of the Reason* constants
}

// Reasons an entry is refused.
const (
	ReasonSymlink  = "symlink"
	ReasonHardLink = "hard link"
	ReasonDevice   = "device"
	ReasonFIFO     = "fifo"
	ReasonSocket   = "socket"
	ReasonTooLarge = "too large"
	ReasonTotal    = "total size cap reached"
	ReasonExists   = "exists in destination"
	ReasonBlocked  = "destination path is not a directory"
	ReasonChanged  = "changed while copying"
)

// FileInfo is a regular file met by Files.
type FileInfo struct {
	Rel      string // slash path relative to the root
	Size     int64
	MtimeNS  int64
	Dev, Ino uint64
}
