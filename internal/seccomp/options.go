package seccomp

// Options tunes the filter. The zero value is the default policy, which the
// sandbox uses.
type Options struct {
	// AllowNamespaces, if true, permits unshare, setns and clone with
	// namespace flags. The sandbox never sets it: it creates all namespaces
	// before installing the filter. It exists for callers that run a
	// nested sandbox tool, and for tests.
	AllowNamespaces bool
}
