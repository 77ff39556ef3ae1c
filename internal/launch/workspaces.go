package launch

// The launcher's side of the per-scope workspaces (package workspace has
// the layout): seeding failures and artifact export, with their logs.

import (
	"fmt"
	"path/filepath"

	"mcpbox/internal/gateway"
	"mcpbox/internal/workspace"
)

// wsScope is scope's workspace for server.
func wsScope(scope gateway.Scope, server string) workspace.Scope {
	return workspace.Scope{Server: server, Agent: scope.Agent, Session: scope.Session}
}

// wsScope is the instance's workspace.
func (in *sandboxInstance) wsScope() workspace.Scope { return wsScope(in.scope, in.l.name) }

// seedFailed logs why a workspace could not be seeded and returns what a
// client may see: host paths stay in the gateway's log.
func (l *Local) seedFailed(err error) error {
	l.log.Error("the workspace template could not be applied", "server", l.name, "err", err)
	return fmt.Errorf("the workspace template of server %s could not be applied (the gateway's log says why)", l.name)
}

// exportArtifacts copies the configured files out of a stopped sandbox's
// output and returns their paths for the audit.
func (l *Local) exportArtifacts(output string, scope gateway.Scope, id string) []string {
	dst := workspace.ArtifactsDir(l.artifactsDir, wsScope(scope, l.name), id)
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
