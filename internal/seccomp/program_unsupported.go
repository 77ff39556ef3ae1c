//go:build !linux || !(amd64 || arm64)

package seccomp

import "golang.org/x/net/bpf"

// Program returns [ErrUnsupported]: this package has no filter for this
// operating system or architecture.
func Program(opts Options) ([]bpf.RawInstruction, error) {
	return nil, ErrUnsupported
}
