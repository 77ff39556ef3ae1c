package cli

// What to do when a serve config requires an isolation layer this host
// lacks (daemon.CgroupsError): the advice, pasteable.

import (
	"os"
	"slices"
	"strings"

	"mcpbox/internal/daemon"
	"mcpbox/internal/launch"
)

// cgroupsAdvice prints what doctor found for the server that cannot get
// cgroups and what to do, in two lines.
func (e *env) cgroupsAdvice(cmd string, err *daemon.CgroupsError, args []string) {
	scope := "systemd-run --user --scope -p Delegate=yes"
	if os.Geteuid() == 0 {
		scope = "systemd-run --scope -p Delegate=yes"
	}
	e.errorf("%s: %v", cmd, err)
	e.errorf("run it in a cgroup delegated to you: %s %s, or accept no cgroup limits: %s (config: sandbox.require without cgroups)",
		scope, commandLine(cmd, args), commandLine(cmd, slices.Concat(args, []string{"--allow-degraded=cgroups"})))
}

// commandLine is "mcpbox CMD ARGS..." as a shell would take it back.
func commandLine(cmd string, args []string) string {
	words := []string{"mcpbox", cmd}
	for _, a := range args {
		words = append(words, launch.ShellWord(a))
	}
	return strings.Join(words, " ")
}
