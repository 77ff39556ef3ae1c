package daemon

import "fmt"

// ConfigError is a config or options that cannot be served as given
// (a refused address, a server the sandbox cannot be built for, a bad
// snapshot): the command line reports it as a usage error.
type ConfigError struct{ Err error }

// Error is the underlying error's message: the CLI adds its own context.
func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error { return &ConfigError{Err: err} }

// CgroupsError is a server that requires the cgroups layer for its
// resource limits on a host (or a user) that cannot give it cgroups:
// every start would fail with a raw mkdir error, so serve refuses to
// start, and the command line says what to do.
type CgroupsError struct {
	Server string
	Err    error // what sandbox.CheckCgroups (and doctor) found
}

// Error names the server and what the check found.
func (e *CgroupsError) Error() string {
	return fmt.Sprintf("server %s needs cgroups for its resource limits, and doctor found %v", e.Server, e.Err)
}

// Unwrap returns what the check found.
func (e *CgroupsError) Unwrap() error { return e.Err }
