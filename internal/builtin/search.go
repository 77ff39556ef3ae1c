package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

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
	out     strings.Builder
	matches int
	skipped int // binary, large or unreadable files
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
	st := &searchState{re: re}
	budget := walkCap
	var walkErr error
	for _, p := range dirs {
		walkErr = st.searchPath(ctx, p, in.Glob, &budget)
		if walkErr != nil {
			break
		}
	}
	if walkErr != nil && !errors.Is(walkErr, errStop) {
		return nil, nil, walkErr
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
		if !st.re.Match(line) {
			continue
		}
		if len(line) > searchLineCap {
			line = append(line[:searchLineCap:searchLineCap], "..."...)
		}
		fmt.Fprintf(&st.out, "%s:%d:%s\n", name, n, strings.ToValidUTF8(string(line), "\uFFFD"))
		st.matches++
		if st.matches >= searchMatches {
			return errStop
		}
	}
	return nil
}
