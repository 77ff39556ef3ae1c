//go:build !linux

package builtin

import (
	"errors"
	"os"
	"os/exec"
)

// errUnsupported: safe resolution beneath a root is implemented for Linux
// only (openat2, or the userspace resolver built on Linux's O_PATH).
var errUnsupported = errors.New("workspace file tools need Linux (openat2)")

type dirEntry struct {
	name string
	kind string
	size int64
}

type dirHandle struct{ path wpath }

func openFile(wpath) (*os.File, int64, error)             { return nil, 0, errUnsupported }
func openDir(wpath) (*dirHandle, error)                   { return nil, errUnsupported }
func (d *dirHandle) close()                               {}
func (d *dirHandle) procPath() string                     { return "" }
func (d *dirHandle) sub(string) (*dirHandle, error)       { return nil, errUnsupported }
func (d *dirHandle) open(string) (*os.File, int64, error) { return nil, 0, errUnsupported }
func (d *dirHandle) entries(int) ([]dirEntry, error)      { return nil, errUnsupported }
func writeFile(wpath, []byte) error                       { return errUnsupported }

// setProcGroup is a no-op off Linux; only the direct child is killed.
func setProcGroup(*exec.Cmd) {}
