//go:build !linux

package cgroup

import "os"

// Cgroup is a sandbox cgroup; without Linux there are none.
type Cgroup struct{}

// Create returns ErrUnsupported.
func Create(id string, l Limits) (*Cgroup, error) { return nil, ErrUnsupported }

// ID returns "".
func (c *Cgroup) ID() string { return "" }

// Add returns ErrUnsupported.
func (c *Cgroup) Add(pid int) error { return ErrUnsupported }

// Pids returns ErrUnsupported.
func (c *Cgroup) Pids() ([]int, error) { return nil, ErrUnsupported }

// Kill returns ErrUnsupported.
func (c *Cgroup) Kill() error { return ErrUnsupported }

// Freeze returns ErrUnsupported.
func (c *Cgroup) Freeze() error { return ErrUnsupported }

// Thaw returns ErrUnsupported.
func (c *Cgroup) Thaw() error { return ErrUnsupported }

// Stats returns ErrUnsupported.
func (c *Cgroup) Stats() (Stats, error) { return Stats{}, ErrUnsupported }

// Destroy returns ErrUnsupported.
func (c *Cgroup) Destroy() error { return ErrUnsupported }

// Paths returns nil.
func (c *Cgroup) Paths() map[string]string { return nil }

// Probe reports every controller as unusable.
func Probe() Report {
	var r Report
	for _, name := range []string{"memory", "pids", "cpu", "freezer"} {
		r.Controllers = append(r.Controllers, ControllerReport{Name: name, Reason: "cgroups need Linux"})
	}
	return r
}

// CleanupStale returns ErrUnsupported.
func CleanupStale() ([]string, error) { return nil, ErrUnsupported }

// SpawnInside returns ErrUnsupported without running start.
func (c *Cgroup) SpawnInside(start func() error) error { return ErrUnsupported }

// DirFD returns ErrUnsupported.
func (c *Cgroup) DirFD() (*os.File, error) { return nil, ErrUnsupported }

// ExitStats returns ErrUnsupported.
func (c *Cgroup) ExitStats() (Stats, error) { return Stats{}, ErrUnsupported }
