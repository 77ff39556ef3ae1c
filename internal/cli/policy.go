package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/launch"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

const policyHelp = `USAGE
  mcpbox policy check [FILE | --config FILE]

Parses and validates a config file. Every problem is printed as
FILE:LINE:COL: message; the exit status is 1 when there is any. Things a
reviewer should see in a valid config (a server with no tools: key, whose
tools are all hidden, a credential in plain env, one secret shared by
several servers, secrets beside broad egress, an env: reference unset
here, a program or host path the sandbox lacks, a mount of ~/.ssh or the
like) are printed as FILE:LINE:COL: warning: message, with exit status 0,
and stdout says FILE: ok, or what cannot start on this machine. Without
FILE, the mcpbox.yaml in the working directory.
`

func (e *env) policy(args []string) int {
	fs := e.newFlagSet("policy", policyHelp)
	cfgFlag := fs.String("config", "", "the config `FILE` to check")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() == 0 || fs.Arg(0) != "check" {
		e.errorf("policy: usage: mcpbox policy check [FILE | --config FILE]")
		return exitUsage
	}
	file, ok := e.configFile("policy check", "one config FILE", fs.Args()[1:], *cfgFlag)
	if !ok {
		return exitUsage
	}
	ws, err := daemon.CheckConfig(file)
	if errors.Is(err, daemon.ErrReadingConfig) {
		e.errorf("policy check: %v", err) // no FILE:LINE:COL to give
		return 1
	} else if err != nil {
		fmt.Fprintln(e.stderr, config.Printable(err.Error()))
		return 1
	}
	for _, w := range ws {
		fmt.Fprintln(e.stderr, config.Printable(fmt.Sprintf("%s:%d:%d: warning: %s", w.File, w.Line, w.Col, w.Msg)))
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", file, config.Printable(ws.Verdict()))
	return 0
}

// specFromPolicy fills spec with the sandbox policy of the first server in
// the config at path (specconv.Policy), its secrets resolved.
func specFromPolicy(path string, spec *sandbox.Spec) error {
	c, err := daemon.LoadConfig(path)
	if err != nil {
		return err
	}
	ps, secs, err := specconv.Policy(c, path)
	if err != nil {
		return err
	}
	*spec = ps
	plain, proxied, err := launch.ResolveAll(context.Background(), secs)
	if err != nil {
		return fmt.Errorf("server %s: %w", c.Servers[0].Name, err)
	}
	spec.Secrets = append(spec.Secrets, plain...)
	// Secrets with inject: placeholders in the sandbox, a CA of this
	// process, refusals logged to stderr.
	return launch.ApplyProxySecrets(spec, proxied, "", nil, launch.SecretEventLogger(slog.Default(), ""))
}
