package builtin

import (
	"context"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures the workspace server. The zero value of each limit
// selects the documented default.
type Options struct {
	// Input is the host directory shown as "input" (read-only), e.g.
	// /workspace/input. Empty: no input root.
	Input string
	// Output is the host directory shown as "output" (read-write), e.g.
	// /workspace/output. Empty: no output root, and no writes there.
	Output string
	// InputWritable lets write_file and edit_file write under input too.
	// Set it only when the input is an overlay (filesystem.input.mode:
	// overlay): the changes land in the sandbox's upper layer, not in the
	// project, and `mcpbox diff` shows them. False: input is read-only.
	InputWritable bool
	// InputHidden are paths beneath input, slash-separated and relative to
	// it, that the file tools neither list, search nor open: the output dir
	// when it lies inside the input (the default's ./mcpbox-out), which the
	// sandbox covers with an empty read-only dir (sandbox.Spec.InputMasks).
	InputHidden []string
	// Commands decides which run_command and start_job command lines run.
	Commands CommandPolicy
	// CommandTimeout bounds one run_command call. Zero: 60s.
	CommandTimeout time.Duration
	// OutputCap is how many bytes of combined stdout and stderr are kept
	// per command or job; the rest is counted and dropped. Zero: 1 MiB.
	OutputCap int
	// JobLifetime is how long a background job may run before it is
	// killed. Zero: 10m.
	JobLifetime time.Duration
	// MaxJobs is how many background jobs may run at once. Zero: 8.
	MaxJobs int
	// Version is reported to clients in the server's implementation info.
	// Empty: "dev".
	Version string
}

// Default limits, applied for zero Options fields.
const (
	DefaultCommandTimeout = 60 * time.Second
	DefaultOutputCap      = 1 << 20
	DefaultJobLifetime    = 10 * time.Minute
	DefaultMaxJobs        = 8
)

// Limits on what one tool call may read, return or walk.
const (
	readCap       = 1 << 20  // bytes of text returned by read_file
	scanCap       = 64 << 20 // bytes read_file skips to reach start_line
	writeCap      = 16 << 20 // bytes of content accepted by write_file / edit_file
	searchFileCap = 4 << 20  // larger files are skipped by search_files
	searchMatches = 200      // matches returned by search_files
	searchLineCap = 300      // bytes of one matching line shown
	listPage      = 200      // entries per list_files page
	walkCap       = 20000    // entries one list/search call visits
	maxDepth      = 20       // deepest list/search recursion
	maxPathLen    = 4096
	maxComponents = 128
)

// server holds the options and the job table shared by all sessions.
type server struct {
	o    Options
	jobs *jobTable
}

// ServeStdio runs the workspace server of o on one session over in and
// out (its sandbox's stdin and stdout, which it does not close) until
// the client goes away or ctx ends.
func ServeStdio(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	return NewServer(o).Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopCloser{out}})
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// NewServer returns the workspace MCP server. Background jobs belong to the
// session that started them and are killed when that session ends, so the
// server needs no Close; a stateless HTTP deployment therefore cannot keep
// jobs across requests.
func NewServer(o Options) *mcp.Server {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.OutputCap <= 0 {
		o.OutputCap = DefaultOutputCap
	}
	if o.JobLifetime <= 0 {
		o.JobLifetime = DefaultJobLifetime
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = DefaultMaxJobs
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &server{o: o, jobs: newJobTable(o.MaxJobs, o.JobLifetime)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpbox-workspace", Title: "mcpbox workspace", Version: o.Version},
		&mcp.ServerOptions{Instructions: s.instructions()})
	s.addFileTools(srv)
	s.addCommandTools(srv)
	return srv
}

func (s *server) instructions() string {
	input := `"input/..." is the read-only project`
	if s.o.InputWritable {
		input = `"input/..." is the project, writable: your changes are kept apart from it for review (mcpbox diff)`
	}
	return `Workspace tools. Paths are relative to the workspace: ` + input + `, "output/..." is where results go ` +
		`(also accepted: /workspace/input/..., /workspace/output/...). Commands run without a shell, under a command policy.`
}

// pathConvention ends the description of every file tool.
func (s *server) pathConvention() string {
	input := "read-only"
	if s.o.InputWritable {
		input = "writable"
	}
	return ` Paths are workspace-relative: "input/..." (` + input + `) or "output/..." ` +
		`(read-write); "/workspace/input/..." and "/workspace/output/..." are accepted too.`
}

// writable names where write_file and edit_file write, for descriptions.
func (s *server) writable() string {
	if s.o.InputWritable {
		return "under output/ or input/ (input/ is an overlay: changes stay out of the project until a human applies them)"
	}
	return "under output/ (input/ is read-only)"
}

// Annotation helpers: hints are pointers in the SDK.
var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no}
}

func mutating(title string, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: yes, IdempotentHint: idempotent, OpenWorldHint: no}
}

// text is the result of every tool: plain text, no structured output, so
// large file contents are not sent twice.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
