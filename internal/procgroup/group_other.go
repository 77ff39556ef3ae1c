//go:build !linux

package procgroup

import (
	"errors"
	"os"
	"syscall"
)

// Group stands for the process group of one process; off Linux it
// signals that process alone.
type Group struct {
	p *os.Process
}

// Open holds the group p leads (off Linux: p alone).
func Open(p *os.Process) (*Group, error) { return &Group{p: p}, nil }

// Signal sends sig to the leader; os.ErrProcessDone once it is gone.
func (g *Group) Signal(sig syscall.Signal) error { return g.p.Signal(sig) }

// Kill sends SIGKILL; a process already gone is fine.
func (g *Group) Kill() error {
	if err := g.p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Close does nothing off Linux.
func (g *Group) Close() error { return nil }
