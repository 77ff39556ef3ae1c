package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type searchArgs struct {
	Pattern string `json:"pattern" jsonschema:"regular expression, RE2 syntax (as Go's regexp)"`
	Path    string `json:"path,omitempty" jsonschema:"directory or file to search; empty searches both roots"`
	Glob    string `json:"glob,omitempty" jsonschema:"only files whose base name matches (path.Match syntax), e.g. *.go"`
}

// searchState collects matches across files and roots.
type searchState struct {
	re      *regexp.Regexp
	insts   int64 // size of the compiled pattern: the cost of a byte
	cost    int64 // bytes searched × insts, against searchCost
	ctx     context.Context
	out     strings.Builder
	matches int
	skipped int // binary, large or unreadable files
	// hidden reports paths the tools do not show (server.hidden).
	hidden func(wpath) bool
}

// searchCost bounds one search's work: the regexp engine is linear in the
// input, but times the size of the pattern's program, and a short pattern
// can compile to thousands of instructions. Only the instructions beyond
// cheapInsts count, so ordinary patterns are bounded by searchTime alone.
const (
	cheapInsts = 64
	searchTime = 60 * time.Second
)

// searchCost is a variable only so that a test can reach the bound with
// less work (under the race detector on a loaded machine, 1e8 steps take
// most of a minute).
var searchCost int64 = 1e8

// errTooCostly ends a search that used up searchCost.
var errTooCostly = errors.New("search too costly")

// progSize is the number of instructions pattern compiles to.
func progSize(pattern string) int64 {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 1
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 1
	}
	return int64(len(prog.Inst))
}

func (s *server) searchFiles(ctx context.Context, _ *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, any, error) {
	if in.Pattern == "" {
		return nil, nil, errors.New("pattern is empty")
	}
	if len(in.Pattern) > 1000 {
		return nil, nil, errors.New("pattern too long (max 1000 bytes)")
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("bad pattern: %v", err)
	}
	if err := checkGlob(in.Glob); err != nil {
		return nil, nil, err
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
	ctx, cancel := context.WithTimeout(ctx, searchTime)
	defer cancel()
	st := &searchState{re: re, insts: max(progSize(in.Pattern)-cheapInsts, 0), ctx: ctx, hidden: s.hidden}
	budget := walkCap
	var walkErr error
	for _, p := range dirs {
		walkErr = st.searchPath(ctx, p, in.Glob, &budget)
		if walkErr != nil {
			break
		}
	}
	timedOut := errors.Is(walkErr, context.DeadlineExceeded) && ctx.Err() != nil
	if walkErr != nil && !errors.Is(walkErr, errStop) && !errors.Is(walkErr, errTooCostly) && !timedOut {
		return nil, nil, walkErr
	}
	switch {
	case errors.Is(walkErr, errTooCostly):
		fmt.Fprintf(&st.out, "[stopped: the search grew too costly for this pattern (%d extra instructions × bytes searched); simplify the pattern or narrow path or glob]\n", st.insts)
	case timedOut:
		fmt.Fprintf(&st.out, "[stopped after %s; narrow the pattern, path or glob]\n", searchTime)
	}
	if st.matches == 0 {
		st.out.WriteString("[no matches]\n")
	}
	switch {
	case st.matches >= searchMatches:
		fmt.Fprintf(&st.out, "[stopped at %d matches; narrow the pattern, path or glob]\n", searchMatches)
	case budget <= 0:
		fmt.Fprintf(&st.out, "[stopped after %d entries; narrow path or glob]\n", walkCap)
	}
	if st.skipped > 0 {
		fmt.Fprintf(&st.out, "[%d binary, large or unreadable files skipped]\n", st.skipped)
	}
	return text(st.out.String()), nil, nil
}

// searchPath searches p, a directory walked to maxDepth or a single file.
func (st *searchState) searchPath(ctx context.Context, p wpath, glob string, budget *int) error {
	d, err := openDir(p)
	if err != nil {
		f, size, ferr := openFile(p)
		if ferr != nil {
			return err // the directory error is the more likely intent
		}
		defer f.Close()
		return st.searchFile(f, size, p.String())
	}
	defer d.close()
	return walk(ctx, d, "", maxDepth, budget, func(rel string, e dirEntry, parent *dirHandle) error {
		if st.hidden(p.join(rel)) {
			return errSkip
		}
		if e.kind != "file" || !matchGlob(glob, rel) {
			return nil
		}
		if e.size > searchFileCap {
			st.skipped++
			return nil
		}
		name := rel[strings.LastIndexByte(rel, '/')+1:]
		f, size, err := parent.open(name)
		if err != nil {
			st.skipped++
			return nil
		}
		defer f.Close()
		return st.searchFile(f, size, p.join(rel).String())
	})
}

// searchFile appends the matching lines of one file; errStop once the
// match cap is reached.
func (st *searchState) searchFile(f io.Reader, size int64, name string) error {
	if size > searchFileCap {
		st.skipped++
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, searchFileCap+1))
	if err != nil || len(data) > searchFileCap || looksBinary(data) {
		st.skipped++
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), searchFileCap+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if st.cost += int64(len(line)+1) * st.insts; st.cost > searchCost {
			return errTooCostly
		}
		if n%1000 == 0 && st.ctx.Err() != nil {
			return st.ctx.Err()
		}
		if !st.re.Match(line) {
			continue
		}
		if len(line) > searchLineCap {
			line = append(line[:searchLineCap:searchLineCap], "..."...)
		}
		fmt.Fprintf(&st.out, "%s:%d:%s\n", displayName(name), n, strings.ToValidUTF8(string(line), "\uFFFD"))
		st.matches++
		if st.matches >= searchMatches {
			return errStop
		}
	}
	return nil
}
