package specconv

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

// Flags are the sandbox flags of exec and run, as the command line gave
// them: the CLI parses the command line, ApplyFlags checks and converts
// the values. Secrets are not here: the CLI resolves them.
type Flags struct {
	// Given are the names of the flags given ("input", "memory", ...). A
	// flag not in it leaves the spec (a policy's, or the defaults) as it
	// is, whatever its field holds.
	Given map[string]bool

	Input, Output string   // host dirs; a relative name is walked from the working dir
	Mounts        []string // SRC:DST[:ro|rw]
	Env           []string // K=V
	AllowHosts    []string // HOST[:PORT]

	Memory, TmpSize, OutputSize string  // sizes such as 512Mi (config.ParseSize)
	Pids                        int64   // 0 is no limit
	CPU                         float64 // cores
	Timeout                     time.Duration
	ExecWritable                bool

	// AllowAllDegraded and AllowDegraded add to the layers the spec may
	// lose (--allow-degraded bare, or with a list).
	AllowAllDegraded bool
	AllowDegraded    []sandbox.Layer
}

// ApplyFlags applies the flags f to spec: a spec from Policy (--policy),
// or one with DefaultLimits. A relative input, output or mount source is
// walked from the working dir without following symlinks: it may be a
// project's. Writable ones must avoid protected places (the home dir,
// /etc, the input). Errors name the flag.
func ApplyFlags(spec *sandbox.Spec, f Flags) error {
	if err := applyDirFlags(spec, f); err != nil {
		return err
	}
	for _, kv := range f.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, "\x00") {
			return fmt.Errorf("--env %q: want K=V", kv)
		}
		spec.Env = append(spec.Env, kv)
	}
	for _, h := range f.AllowHosts {
		r, err := egress.ParseHostPort(h)
		if err != nil {
			return fmt.Errorf("--allow-host %s: %w", h, err)
		}
		spec.Network.Rules = append(spec.Network.Rules, r)
	}
	if err := f.limits(&spec.Limits); err != nil {
		return err
	}
	if f.Given["output-size"] && spec.Output == "" {
		return errors.New("--output-size: there is no output dir to limit (give --output)")
	}
	if f.Given["exec-writable"] {
		spec.ExecWritable = f.ExecWritable
	}
	spec.AllowAllDegraded = spec.AllowAllDegraded || f.AllowAllDegraded
	spec.AllowDegraded = append(spec.AllowDegraded, f.AllowDegraded...)
	return nil
}

// applyDirFlags applies --input, --output and --mount.
func applyDirFlags(spec *sandbox.Spec, f Flags) error {
	var err error
	// Relative names are walked from the working dir without symlinks
	// (hostSource): it may be a project's. An absolute one was typed.
	if f.Given["input"] {
		if spec.Input, err = hostSourceDir(flagBase(f.Input), "", f.Input, 0); err != nil {
			return fmt.Errorf("--input: %w", err)
		}
	}
	protected := protectedPlaces(".", spec.Input, "")
	if f.Given["output"] {
		if spec.Output, err = outputDir(flagBase(f.Output), "", f.Output, 0o755, protected); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	} else if spec.Output != "" && f.Given["input"] {
		// The policy's output, checked against the input given here.
		if err := protected.Check(spec.Output); err != nil {
			return fmt.Errorf("filesystem.output: %w", err)
		}
	}
	for _, m := range f.Mounts {
		mnt, err := parseMount(m)
		written := ""
		if src, rest, ok := strings.Cut(m, ":"); ok && err == nil {
			written = src
			if src, err = hostSource(flagBase(src), "", src, 0); err == nil {
				mnt, err = parseMount(src + ":" + rest)
			}
		}
		if err == nil && mnt.Writable {
			err = checkWritten(protected, flagBase(written), written, mnt.Source)
		}
		if err != nil {
			return fmt.Errorf("--mount %s: %w", m, err)
		}
		spec.Mounts = append(spec.Mounts, mnt)
	}
	return nil
}

// limits applies the limit flags given to l.
func (f Flags) limits(l *sandbox.Limits) error {
	sizes := []struct {
		name string
		val  string
		dst  *int64
	}{{"memory", f.Memory, &l.Memory}, {"tmp-size", f.TmpSize, &l.TmpSize}, {"output-size", f.OutputSize, &l.OutputSize}}
	for _, s := range sizes {
		if !f.Given[s.name] {
			continue
		}
		n, err := config.ParseSize(s.val)
		if err != nil {
			return fmt.Errorf("--%s: %w", s.name, err)
		}
		*s.dst = int64(n)
	}
	if f.Given["pids"] {
		if f.Pids < 0 {
			return errors.New("--pids: must be 0 (no limit) or positive")
		}
		l.Pids = f.Pids
	}
	if f.Given["cpu"] {
		if f.CPU < 0 || f.CPU > 1024 {
			return errors.New("--cpu: must be between 0 and 1024 cores")
		}
		l.CPU = f.CPU
	}
	if f.Given["timeout"] {
		if f.Timeout < 0 {
			return errors.New("--timeout: must not be negative")
		}
		l.Timeout = f.Timeout
	}
	return nil
}

// parseMount reads the --mount syntax SRC:DST[:ro|rw]. The source is
// made real (symlinks followed): callers walk a project's name first.
func parseMount(s string) (sandbox.Mount, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return sandbox.Mount{}, errors.New("want SRC:DST[:ro|rw]")
	}
	m := sandbox.Mount{Target: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
		case "rw":
			m.Writable = true
		default:
			return m, fmt.Errorf("mode %q: want ro or rw", parts[2])
		}
	}
	m.Exec = !m.Writable
	if err := config.CheckMountTarget(m.Target); err != nil {
		return m, fmt.Errorf("target: %w", err)
	}
	abs, err := filepath.Abs(parts[0])
	if err != nil {
		return m, err
	}
	if m.Source, err = filepath.EvalSymlinks(abs); err != nil {
		return m, err
	}
	return m, nil
}
