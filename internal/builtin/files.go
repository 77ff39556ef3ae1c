package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type listArgs struct {
	Path   string `json:"path,omitempty" jsonschema:"directory to list; empty lists both roots"`
	Glob   string `json:"glob,omitempty" jsonschema:"only entries whose base name matches (path.Match syntax); a glob with a slash matches the path relative to the listed directory"`
	Depth  int    `json:"depth,omitempty" jsonschema:"levels to descend, 1 (default) to 20"`
	Cursor string `json:"cursor,omitempty" jsonschema:"cursor from the previous page"`
}

type readArgs struct {
	Path      string `json:"path" jsonschema:"file to read"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"first line to return, from 1 (default 1)"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"last line to return, inclusive (default: end of file)"`
}

func (s *server) addFileTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name: "list_files",
		Description: "List a directory of the workspace, recursively up to depth. Directories end in \"/\"; " +
			"symlinks are shown, never followed. At most 200 entries per page: pass the returned cursor for more." +
			s.pathConvention(),
		Annotations: readOnly("List files"),
	}, s.listFiles)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "read_file",
		Description: "Read a text file, optionally a line range. Returns at most 1 MiB of text; " +
			"binary files are reported with their size, not shown." + s.pathConvention(),
		Annotations: readOnly("Read file"),
	}, s.readFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "search_files",
		Description: "Search text files for a regular expression (RE2 syntax), returning file:line:text, " +
			"at most 200 matches. Skips binary files and files over 4 MiB; does not follow symlinks." + s.pathConvention(),
		Annotations: readOnly("Search files"),
	}, s.searchFiles)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "write_file",
		Description: "Create or replace a file " + s.writable() + " with the given content, creating parent " +
			"directories. Never writes through a symlink." + s.pathConvention(),
		Annotations: mutating("Write file", true),
	}, s.writeFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "edit_file",
		Description: "Replace the one occurrence of old with new in a file " + s.writable() + ". Fails if old " +
			"is missing or occurs more than once (add context to make it unique)." + s.pathConvention(),
		Annotations: mutating("Edit file", false),
	}, s.editFile)
}

// errStop ends a walk early without an error; errSkip, returned by a
// visit, passes over the entry: a hidden dir is not entered.
var (
	errStop = errors.New("stop walk")
	errSkip = errors.New("skip entry")
)

// walk visits the entries beneath d up to depth levels, in name order, and
// counts visits against walkCap. Symlinks are visited but never followed.
func walk(ctx context.Context, d *dirHandle, rel string, depth int, budget *int, visit func(rel string, e dirEntry, d *dirHandle) error) error {
	entries, err := d.entries(*budget)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if *budget <= 0 {
			return errStop
		}
		*budget--
		if err := ctx.Err(); err != nil {
			return err
		}
		r := e.name
		if rel != "" {
			r = rel + "/" + e.name
		}
		if err := visit(r, e, d); errors.Is(err, errSkip) {
			continue
		} else if err != nil {
			return err
		}
		if e.kind == "directory" && depth > 1 {
			sub, err := d.sub(e.name)
			if err != nil {
				continue // replaced or unreadable meanwhile: skip, keep walking
			}
			err = walk(ctx, sub, r, depth-1, budget, visit)
			sub.close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in listArgs) (*mcp.CallToolResult, any, error) {
	depth := in.Depth
	if depth <= 0 {
		depth = 1
	}
	depth = min(depth, maxDepth)
	if err := checkGlob(in.Glob); err != nil {
		return nil, nil, err
	}
	offset := 0
	if in.Cursor != "" {
		n, err := strconv.Atoi(in.Cursor)
		if err != nil || n < 0 {
			return nil, nil, errors.New("bad cursor; pass the cursor of the previous page unchanged")
		}
		offset = n
	}
	var dirs []wpath
	if in.Path == "" {
		dirs = s.roots()
	} else {
		p, err := s.resolve(in.Path)
		if err != nil {
			return nil, nil, err
		}
		dirs = []wpath{p}
	}
	var lines []string
	budget := walkCap
	stopped := false
	for _, p := range dirs {
		if in.Path == "" && matchGlob(in.Glob, p.root) {
			lines = append(lines, p.root+"/")
		}
		sub := depth
		if in.Path == "" {
			sub = depth - 1 // the roots themselves are the first level
		}
		if sub == 0 {
			continue
		}
		d, err := openDir(p)
		if err != nil {
			return nil, nil, err
		}
		err = walk(ctx, d, "", sub, &budget, func(rel string, e dirEntry, _ *dirHandle) error {
			if s.hidden(p.join(rel)) {
				return errSkip
			}
			if matchGlob(in.Glob, rel) {
				lines = append(lines, formatEntry(p.join(rel).String(), e))
			}
			return nil
		})
		d.close()
		if errors.Is(err, errStop) {
			stopped = true
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return text(page(lines, offset, stopped)), nil, nil
}

func formatEntry(name string, e dirEntry) string {
	name = displayName(name)
	switch e.kind {
	case "directory":
		return name + "/"
	case "file":
		return fmt.Sprintf("%s  (%d bytes)", name, e.size)
	}
	return fmt.Sprintf("%s  (%s)", name, e.kind)
}

// displayName quotes a name with control characters or invalid UTF-8, so
// that a planted file name cannot forge lines of a listing.
func displayName(name string) string {
	if !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) >= 0 {
		return strconv.Quote(name)
	}
	return name
}

func page(lines []string, offset int, stopped bool) string {
	if offset > len(lines) {
		offset = len(lines)
	}
	end := min(offset+listPage, len(lines))
	var b strings.Builder
	for _, l := range lines[offset:end] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	switch {
	case end < len(lines):
		fmt.Fprintf(&b, "[%d of %d entries; next cursor: %d]\n", end-offset, len(lines), end)
	case len(lines) == 0:
		b.WriteString("[no entries]\n")
	case offset == len(lines):
		b.WriteString("[no more entries]\n")
	}
	if stopped {
		fmt.Fprintf(&b, "[listing stopped after %d entries; narrow path, glob or depth]\n", walkCap)
	}
	return b.String()
}

// looksBinary reports NUL bytes or invalid UTF-8 in a sniffed prefix; a
// rune cut off at the end of the prefix does not count.
func looksBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if utf8.Valid(b) {
		return false
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return !utf8.Valid(b[:i])
			}
			break
		}
	}
	return true
}

func (s *server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in readArgs) (*mcp.CallToolResult, any, error) {
	start, end := max(in.StartLine, 1), in.EndLine
	if end != 0 && end < start {
		return nil, nil, errors.New("end_line is before start_line")
	}
	p, err := s.resolve(in.Path)
	if err != nil {
		return nil, nil, err
	}
	f, size, err := openFile(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	sniff, _ := r.Peek(8 << 10)
	if looksBinary(sniff) {
		return text(fmt.Sprintf("%s is a binary file (%d bytes); not shown", p, size)), nil, nil
	}
	var out bytes.Buffer
	line, scanned, truncated, reached := 1, 0, false, false
	for end == 0 || line <= end {
		chunk, err := r.ReadSlice('\n')
		scanned += len(chunk)
		if line >= start && len(chunk) > 0 {
			reached = true
			if room := readCap - out.Len(); len(chunk) > room {
				out.Write(chunk[:room])
				truncated = true
				break
			}
			out.Write(chunk)
		} else if scanned > scanCap {
			return nil, nil, fmt.Errorf("%s: line %d is beyond the first %d MiB; not reachable with read_file", p, start, scanCap>>20)
		}
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			line++
			if line%4096 == 0 && ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: reading: %v", p, err)
		}
	}
	if !reached && start > 1 {
		return nil, nil, fmt.Errorf("%s: start_line %d is past the end of the file", p, start)
	}
	body := strings.ToValidUTF8(out.String(), "\uFFFD")
	if truncated {
		body += fmt.Sprintf("\n[truncated at %d KiB in line %d; continue with start_line=%d]\n", readCap>>10, line, line)
	}
	if body == "" {
		body = "[empty]"
	}
	return text(body), nil, nil
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"file to create or replace, under output/ (or input/ where it is writable)"`
	Content string `json:"content" jsonschema:"the complete new content (UTF-8 text)"`
}

type editArgs struct {
	Path string `json:"path" jsonschema:"file to edit, under output/ (or input/ where it is writable)"`
	Old  string `json:"old" jsonschema:"exact text to replace; must occur exactly once"`
	New  string `json:"new" jsonschema:"replacement text"`
}

func (s *server) writeFile(_ context.Context, _ *mcp.CallToolRequest, in writeArgs) (*mcp.CallToolResult, any, error) {
	if len(in.Content) > writeCap {
		return nil, nil, fmt.Errorf("content too large (max %d MiB)", writeCap>>20)
	}
	p, err := s.resolveWrite(in.Path)
	if err != nil {
		return nil, nil, err
	}
	if err := writeFile(p, []byte(in.Content)); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), p)), nil, nil
}

func (s *server) editFile(_ context.Context, _ *mcp.CallToolRequest, in editArgs) (*mcp.CallToolResult, any, error) {
	if in.Old == "" {
		return nil, nil, errors.New("old is empty")
	}
	p, err := s.resolveWrite(in.Path)
	if err != nil {
		return nil, nil, err
	}
	f, size, err := openFile(p)
	if err != nil {
		return nil, nil, err
	}
	if size > writeCap {
		f.Close()
		return nil, nil, fmt.Errorf("%s: too large to edit (max %d MiB)", p, writeCap>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, writeCap+1))
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading: %v", p, err)
	}
	if len(data) > writeCap { // it grew since the size check: never write back a cut file
		return nil, nil, fmt.Errorf("%s: too large to edit (max %d MiB)", p, writeCap>>20)
	}
	if looksBinary(data) {
		return nil, nil, fmt.Errorf("%s: is a binary file; not edited", p)
	}
	content := string(data)
	switch n := strings.Count(content, in.Old); n {
	case 0:
		return nil, nil, fmt.Errorf("%s: old text not found", p)
	case 1:
	default:
		return nil, nil, fmt.Errorf("%s: old text occurs %d times; include more context to make it unique", p, n)
	}
	content = strings.Replace(content, in.Old, in.New, 1)
	if len(content) > writeCap {
		return nil, nil, fmt.Errorf("%s: result too large (max %d MiB)", p, writeCap>>20)
	}
	if err := writeFile(p, []byte(content)); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("edited %s", p)), nil, nil
}
