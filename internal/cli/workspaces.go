package cli

// Per-scope workspaces: output and overlay dirs, seeding from templates
// and snapshots, artifact export.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"mcpbox/internal/gateway"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/workspace"
)

// workspaceBase is a scope's workspace: workspaces/AGENT/SERVER, with a
// sessions/ID level for session scope and _shared for shared scope.
func workspaceBase(root string, scope gateway.Scope, server string) string {
	agent := scope.Agent
	if agent == "" {
		agent = "_shared"
	}
	dir := filepath.Join(root, agent, server)
	if scope.Session != "" {
		dir = filepath.Join(dir, "sessions", scope.Session)
	}
	return dir
}

// workspaceDir makes the per-scope output dir, WORKSPACE/output.
func workspaceDir(root string, scope gateway.Scope, server string) (string, error) {
	dir, err := mkdirBeneath(root, filepath.Join(workspaceBase(root, scope, server), "output"))
	if err != nil {
		return "", fmt.Errorf("creating workspace: %w", err)
	}
	return dir, nil
}

// mkdirBeneath makes dir, a path beneath root, and returns its real path.
// Below root no symlink is followed: sandboxes wrote in the workspaces
// tree, and a link planted there must not put a sandbox's mount, or our
// writes, elsewhere on the host.
func mkdirBeneath(root, dir string) (string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	return workspace.MakeHostDir(root, rel, 0o700)
}

// overlayDirs makes the upper and work dirs of a scope's input overlay,
// WORKSPACE/overlay/{upper,work}: their parent is mounted into the
// sandbox init (never the workload), so it holds nothing else.
func overlayDirs(root string, scope gateway.Scope, server string) (*sandbox.Overlay, error) {
	dir := filepath.Join(workspaceBase(root, scope, server), "overlay")
	ov := &sandbox.Overlay{}
	for _, d := range []struct {
		dst  *string
		name string
	}{{&ov.Upper, "upper"}, {&ov.Work, "work"}} {
		real, err := mkdirBeneath(root, filepath.Join(dir, d.name))
		if err != nil {
			return nil, fmt.Errorf("creating the input overlay: %w", err)
		}
		*d.dst = real
	}
	return ov, nil
}

// removeWorkspace removes a session's workspace dir. The kernel leaves an
// overlay's work/work dir with mode 0, which an unprivileged owner must
// open up first.
func removeWorkspace(dir string) {
	_ = os.Chmod(filepath.Join(dir, "overlay", "work", "work"), 0o700)
	os.RemoveAll(dir)
}

// isSnapshot reports whether path is an mcpbox snapshot (an archive with
// snapshot metadata).
func isSnapshot(path string) bool {
	if path == "" {
		return false
	}
	_, err := workspace.ReadMeta(path)
	return err == nil
}

// seedFailed logs why a workspace could not be seeded and returns what a
// client may see: host paths stay in the gateway's log.
func (l *sandboxLauncher) seedFailed(err error) error {
	l.log.Error("the workspace template could not be applied", "server", l.name, "err", err)
	return fmt.Errorf("the workspace template of server %s could not be applied (the gateway's log says why)", l.name)
}

// seedWorkspace fills a new workspace dir from a template: a snapshot's
// part (output, overlay), or a dir or archive for the output.
func seedWorkspace(template, part, dst string) error {
	var err error
	switch {
	case isSnapshot(template):
		err = workspace.Restore(template, part, dst)
		if errors.Is(err, workspace.ErrNoPart) {
			err = nil // the snapshot's sandbox had no such part
		}
	case part == "output":
		// Seed wants an empty dir: dst was just made.
		err = workspace.Seed(dst, template)
	}
	return err // it names the template and the workspace
}

// exportArtifacts copies the configured files out of a stopped sandbox's
// output and returns their paths for the audit.
func (l *sandboxLauncher) exportArtifacts(output string, scope gateway.Scope, id string) []string {
	agent := scope.Agent
	if agent == "" {
		agent = "_shared"
	}
	dst := filepath.Join(l.artifactsDir, agent, l.name, id)
	done, refused, err := workspace.Export(output, dst, *l.artifacts)
	if err != nil {
		l.log.Warn("exporting artifacts", "server", l.name, "sandbox", id, "err", err)
	}
	for _, r := range refused {
		l.log.Warn("artifact refused", "server", l.name, "sandbox", id, "path", r.Path, "reason", r.Reason)
	}
	var paths []string
	for _, e := range done {
		paths = append(paths, fmt.Sprintf("%s (%d bytes, sha256 %s)", filepath.Join(dst, e.Path), e.Size, e.SHA256))
	}
	return paths
}
