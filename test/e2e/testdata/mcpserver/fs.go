package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fs_* tools act on absolute paths under /workspace, for the
// workspace tests: overlay writes and deletions, links the artifact
// export must refuse, and listings of what a template seeded.

type fsIn struct {
	Path string `json:"path" jsonschema:"an absolute path under /workspace"`
	Text string `json:"text,omitempty"`
}

type fsLinkIn struct {
	Target string `json:"target" jsonschema:"what the link points to (fs_symlink: any string; fs_link: an absolute path under /workspace)"`
	Path   string `json:"path" jsonschema:"the new link, an absolute path under /workspace"`
}

// underWorkspace refuses paths outside /workspace, so a test cannot
// mistake a write elsewhere in the sandbox for a workspace write.
func underWorkspace(p string) (string, error) {
	c := filepath.Clean(p)
	if !strings.HasPrefix(c, "/workspace/") {
		return "", fmt.Errorf("path %q is not under /workspace", p)
	}
	return c, nil
}

func (s *server) registerFS() {
	srv := s.srv
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_write", Description: "writes text to PATH, making its parent dirs"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsIn) (*mcp.CallToolResult, any, error) {
			p, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, nil, err
			}
			if err := os.WriteFile(p, []byte(in.Text), 0o644); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_read", Description: "returns the text of PATH"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsIn) (*mcp.CallToolResult, any, error) {
			p, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_remove", Description: "removes the file PATH"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsIn) (*mcp.CallToolResult, any, error) {
			p, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			if err := os.Remove(p); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_symlink", Description: "makes PATH a symlink to TARGET"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsLinkIn) (*mcp.CallToolResult, any, error) {
			p, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			if err := os.Symlink(in.Target, p); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_link", Description: "makes PATH a hard link to TARGET"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsLinkIn) (*mcp.CallToolResult, any, error) {
			p, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			old, err := underWorkspace(in.Target)
			if err != nil {
				return nil, nil, err
			}
			if err := os.Link(old, p); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_list", Description: "returns the files beneath PATH, one relative path a line, sorted; symlinks as NAME -> TARGET"},
		func(_ context.Context, _ *mcp.CallToolRequest, in fsIn) (*mcp.CallToolResult, any, error) {
			root, err := underWorkspace(in.Path)
			if err != nil {
				return nil, nil, err
			}
			lines, err := listTree(root)
			if err != nil {
				return nil, nil, err
			}
			return text(strings.Join(lines, "\n")), nil, nil
		})
}

// listTree names the non-directories beneath root without following
// symlinks.
func listTree(root string) ([]string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel += " -> " + t
		}
		lines = append(lines, rel)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sort.Strings(lines)
	return lines, nil
}
