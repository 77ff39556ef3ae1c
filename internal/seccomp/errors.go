package seccomp

import "errors"

var (
	// ErrUnsupported is returned on operating systems and architectures
	// this package has no filter for.
	ErrUnsupported = errors.New("seccomp filter unsupported on this platform")

	// ErrNoNewPrivs is returned by Install when the calling thread has not
	// set PR_SET_NO_NEW_PRIVS. The kernel would accept the filter from a
	// CAP_SYS_ADMIN caller anyway; we refuse so that the sandbox behaves
	// the same whether it starts as root or not.
	ErrNoNewPrivs = errors.New("no_new_privs not set on the calling thread")
)
