//go:build !linux

package seccomp

import "golang.org/x/net/bpf"

// Install returns [ErrUnsupported]: seccomp exists only on Linux.
func Install(prog []bpf.RawInstruction) error {
	return ErrUnsupported
}

// Available returns [ErrUnsupported]: seccomp exists only on Linux.
func Available() error {
	return ErrUnsupported
}
