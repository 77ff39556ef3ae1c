package daemon

// A start-up warning for Node servers that are given egress the host's
// Node cannot use: Node's fetch and http ignore HTTP(S)_PROXY before
// 22.21 and 24, which read NODE_USE_ENV_PROXY (set in every sandbox).
// Such requests still reach allowed hosts by name on ports below 1024
// (the sandbox's transparent egress), but not on a higher port a rule
// allows: nothing listens there, and the request fails with
// ECONNREFUSED, which looks like a broken network rather than a runtime
// that ignores the proxy.

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/pkginstall"
)

// nodeProxyWarnings flags each local Node server whose network.egress
// allows a port above 1023 when the host's node (the one its sandbox
// runs) ignores proxy variables. version returns the host's node version
// ("v20.20.2"), "" if none.
func nodeProxyWarnings(c *config.Config, version func() string) config.Errors {
	var ws config.Errors
	v := ""
	for _, s := range c.Servers {
		if s == nil || s.Image.Ref != "" || c.BackendOf(s).Kind == config.BackendKubernetes || !runsNode(s) {
			continue
		}
		high := highPorts(s.Network.Egress)
		if len(high) == 0 {
			continue
		}
		if v == "" {
			if v = version(); v == "" {
				return nil
			}
		}
		if nodeReadsProxyEnv(v) {
			return nil
		}
		pos := s.Network.Meta.At("egress")
		ws = append(ws, &config.Error{File: c.File, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf(
			"servers.%s.network.egress: the host's Node %s, which the sandbox runs, ignores the proxy mcpbox gives it in fetch and http "+
				"(Node 22.21 and 24 read NODE_USE_ENV_PROXY, which mcpbox sets), and without the proxy a sandbox reaches allowed hosts "+
				"on ports below 1024 only: unless server %s reads HTTPS_PROXY itself, its requests to %s fail (connect ECONNREFUSED); "+
				"install a newer Node on the host", s.Name, v, s.Name, joinPorts(high))})
	}
	return ws
}

// highPorts are the ports above 1023 that rules allow, sorted, once each.
func highPorts(rules []config.Egress) []int {
	var ps []int
	for _, r := range rules {
		for _, p := range r.Ports {
			if p > 1023 && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	slices.Sort(ps)
	return ps
}

// joinPorts writes ports as "port 8443" or "ports 8443, 9000".
func joinPorts(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	if len(s) == 1 {
		return "port " + s[0]
	}
	return "ports " + strings.Join(s, ", ")
}

// runsNode reports whether s runs under the host's node: an npm package,
// an npx-style command, or node itself.
func runsNode(s *config.Server) bool {
	if strings.HasPrefix(s.Package, "npm:") {
		return true
	}
	if src, _, ok, _ := pkginstall.FromCommand(s.Command); ok {
		return src.Ecosystem == pkginstall.NPM
	}
	return len(s.Command) > 0 && path.Base(s.Command[0]) == "node"
}

// nodeReadsProxyEnv reports whether Node version v ("v22.21.0") honours
// NODE_USE_ENV_PROXY: 22.21 and later 22s, 24 and later. An unreadable
// version is given the benefit of the doubt.
func nodeReadsProxyEnv(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return major >= 24 || major == 22 && minor >= 21
}

// hostNodeVersion runs the node the sandbox's PATH finds, for at most
// two seconds; "" if there is none or it does not answer.
func hostNodeVersion() string {
	bin := sandboxLookPath("node")
	if bin == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
