package cli

import (
	"context"
	"errors"
	"flag"
	"runtime"
	"strconv"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/launch"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

const execHelp = `USAGE
  mcpbox exec [flags] -- CMD [ARG...]

Runs CMD in a fresh sandbox. Standard input, output and error are passed
through; mcpbox exits with CMD's exit status (128+N when it was killed by
signal N, 124 when --timeout expired, 125 when the sandbox could not be set
up, 126/127 when CMD could not be executed or found, 2 on macOS: local
sandboxes need Linux).

Inside: /workspace/input (--input, read-only), /workspace/output (--output,
read-write, bounded by --output-size; the working directory when given),
/tmp (tmpfs, --tmp-size), HOME=/tmp/home, a read-only system view, no
network, uid 1000 with no capabilities. Files written to --output belong
to the invoking user.

If an isolation layer is unavailable on this host the sandbox does not
start, unless --allow-degraded accepts losing it ('mcpbox doctor' lists
what this host supports).

EXAMPLES
  mcpbox exec --input . --output ./out -- sh -c 'ls /workspace/input > out.txt'
  mcpbox exec --memory 256Mi --pids 64 --timeout 30s -- python3 script.py
  mcpbox exec --input ~/repo --mount ~/.npm-global/lib/node_modules:/opt/node_modules -- \
      node /opt/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /workspace/input
`

// sandboxFlags are the flags exec and run share (DESIGN.md).
type sandboxFlags struct {
	policy, input, output, outputSize, tmpSize, memory, stateDir string
	pids                                                         int64
	cpu                                                          float64
	timeout                                                      time.Duration
	execWritable                                                 bool
	mounts, allowHosts, envs, secrets                            listFlag
	degraded                                                     degradedFlag
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "use the sandbox policy of the first server in config `FILE`\n(flags given as well override it)")
	fs.StringVar(&f.input, "input", "", "bind `DIR` read-only at /workspace/input")
	fs.StringVar(&f.output, "output", "", "bind `DIR` read-write at /workspace/output (created if missing)")
	fs.Var(&f.mounts, "mount", "bind `SRC:DST[:ro|rw]` (default ro; repeatable)")
	fs.StringVar(&f.outputSize, "output-size", "", "most the output dir may hold on the host, e.g. `1Gi`; no file grows past it,\nand the sandbox is killed when the dir does (default: no limit)")
	fs.StringVar(&f.tmpSize, "tmp-size", "", "size of /tmp, e.g. `256Mi` (default 256Mi)")
	fs.Var(&f.allowHosts, "allow-host", "allow egress to `HOST[:PORT]` through the egress proxy (repeatable;\nno port: 443 and 80; default: no network at all)")
	fs.Var(&f.envs, "env", "set `K=V` in the sandbox (repeatable)")
	fs.Var(&f.secrets, "secret", "inject secret `NAME=REF[,as=env|file]` (REF: env:VAR, file:PATH, cmd:COMMAND;\nas=file puts it in /run/secrets/NAME; repeatable)")
	fs.StringVar(&f.memory, "memory", "", "memory limit, e.g. `512Mi` (default "+specconv.DefaultMemory+"; 0 = none)")
	fs.Int64Var(&f.pids, "pids", -1, "process and thread `limit` of the command (default "+strconv.Itoa(specconv.DefaultPids)+"; 0 = none)")
	fs.Float64Var(&f.cpu, "cpu", 0, "CPU limit in `cores`, e.g. 1.0 (default: none)")
	fs.DurationVar(&f.timeout, "timeout", 0, "kill the sandbox after `DURATION`, e.g. 10m (default: none)")
	fs.StringVar(&f.stateDir, "state-dir", "", "the state `DIR` of a package server's store and pins (npx -y PKG, uvx PKG;\ndefault: the current dir's project state dir)")
	fs.BoolVar(&f.execWritable, "exec-writable", false, "allow executing files from /tmp, /workspace/output and rw mounts")
	fs.Var(&f.degraded, "allow-degraded", "start even when the `LAYERS` (comma list of seccomp, landlock,\ncgroups, idmap; bare flag: any) are unavailable")
}

func (e *env) exec(args []string) int {
	fs := e.newFlagSet("exec", execHelp)
	var f sandboxFlags
	f.register(fs)
	fs.Lookup("state-dir").Usage = hiddenFlag // run's: exec has no package store
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	if code, stop := e.localOnly("exec"); stop {
		return code
	}
	argv, spec, ok := e.commandSpec(fs, &f, "exec", "no command given")
	if !ok {
		return exitUsage
	}
	spec.Args = argv
	return e.runSandbox(spec)
}

// goos is the system mcpbox runs on; a test sets another (the macOS
// build is only cross-compiled in CI).
var goos = runtime.GOOS

// localOnly refuses cmd, which needs a local sandbox, where none can run
// (macOS), before a flag is acted on (a --secret cmd: would run).
func (e *env) localOnly(cmd string) (int, bool) {
	if err := sandbox.LocalSupported(goos); err != nil {
		e.errorf("%s: %v", cmd, err)
		return sandbox.ExitNeedsLinux, true
	}
	return 0, false
}

// commandSpec reads the command after the flags ("--" optional) and
// builds the sandbox Spec from the flags, for exec and run; ok false
// means the usage error has been printed.
func (e *env) commandSpec(fs *flag.FlagSet, f *sandboxFlags, cmd, missing string) ([]string, *sandbox.Spec, bool) {
	argv := fs.Args()
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		e.errorf("%s: %s (usage: mcpbox %s [flags] -- CMD [ARG...])", cmd, missing, cmd)
		return nil, nil, false
	}
	spec, err := f.spec(fs)
	if err != nil {
		e.errorf("%s: %v", cmd, err)
		return nil, nil, false
	}
	return argv, spec, true
}

// runSandbox runs spec with the process's own stdio and turns the result
// into an exit code, explaining limits that were hit on stderr.
func (e *env) runSandbox(spec *sandbox.Spec) int {
	ctx := context.Background()
	stdio := sandbox.Stdio{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr}
	if spec.Network.Enabled() && spec.Network.Log == nil {
		denials := egress.NewDenials(func(line string) { e.errorf("%s", line) })
		spec.Network.Log = denials.Log
		// Wait closes the proxy, whose last Log calls come just before:
		// their lines are printed before the exit code is.
		defer denials.Flush(time.Second)
	}
	// Caught from before the start: a SIGTERM during setup is delivered
	// to the workload once it runs, instead of killing mcpbox midway.
	sigs := sandbox.ForwardSignals()
	defer sigs.Stop()
	sb, err := sandbox.Start(ctx, *spec, stdio)
	if err != nil {
		e.errorf("%v", err)
		var se *sandbox.StartError
		if errors.As(err, &se) {
			return se.Code
		}
		return 125
	}
	for _, l := range sb.Degraded {
		e.errorf("warning: running without isolation layer %s (--allow-degraded)", l)
	}
	sigs.To(sb)
	res, err := sb.Wait()
	if err != nil {
		e.errorf("%v", err)
		if res == nil {
			return 125
		}
	}
	switch {
	case res.TimedOut:
		e.errorf("sandbox killed after --timeout %s", spec.Limits.Timeout)
		return 124
	case res.OOMKilled:
		e.errorf("sandbox hit its memory limit (%s); the kernel killed a process", config.Size(spec.Limits.Memory))
	case res.PidsExhausted:
		e.errorf("sandbox hit its process limit (%d); fork failed", spec.Limits.Pids)
	case res.SizeExceeded != nil && res.SizeExceeded.Stopped:
		e.errorf("sandbox stopped: %s", launch.SizeReport(res.SizeExceeded))
	case res.SizeExceeded != nil:
		e.errorf("the command exited with %s", launch.SizeReport(res.SizeExceeded))
	}
	return res.ExitCode
}

// spec builds the sandbox Spec from the policy file (if any) and flags
// (specconv.ApplyFlags); the flags' secrets are resolved last.
func (f *sandboxFlags) spec(fs *flag.FlagSet) (*sandbox.Spec, error) {
	spec := &sandbox.Spec{}
	if f.policy != "" {
		if err := specFromPolicy(f.policy, spec); err != nil {
			return nil, err
		}
	} else {
		spec.Limits.Memory, spec.Limits.Pids = specconv.DefaultLimits()
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	err := specconv.ApplyFlags(spec, specconv.Flags{
		Given: set, Input: f.input, Output: f.output, Mounts: f.mounts, Env: f.envs, AllowHosts: f.allowHosts,
		Memory: f.memory, TmpSize: f.tmpSize, OutputSize: f.outputSize, Pids: f.pids, CPU: f.cpu, Timeout: f.timeout,
		ExecWritable: f.execWritable, AllowAllDegraded: f.degraded.all, AllowDegraded: f.degraded.layers,
	})
	if err != nil {
		return nil, err
	}
	for _, sf := range f.secrets {
		sec, err := launch.SecretFlag(context.Background(), sf)
		if err != nil {
			return nil, err
		}
		spec.Secrets = append(spec.Secrets, sec)
	}
	return spec, nil
}

// degradedFlag is --allow-degraded: bare it accepts any missing layer,
// with a value only the listed ones.
type degradedFlag struct {
	all    bool
	layers []sandbox.Layer
}

func (d *degradedFlag) IsBoolFlag() bool { return true }
func (d *degradedFlag) String() string {
	if d == nil || d.all {
		return ""
	}
	var s []string
	for _, l := range d.layers {
		s = append(s, string(l))
	}
	return strings.Join(s, ",")
}

func (d *degradedFlag) Set(v string) error {
	switch v {
	case "true":
		d.all = true
		return nil
	case "false":
		d.all, d.layers = false, nil
		return nil
	}
	for _, name := range strings.Split(v, ",") {
		l, err := sandbox.ParseLayer(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		d.layers = append(d.layers, l)
	}
	return nil
}
