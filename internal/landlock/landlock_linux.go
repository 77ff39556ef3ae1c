package landlock

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// ABI returns the Landlock ABI version of the running kernel, or 0 when the
// kernel lacks Landlock or it is disabled at boot. The result is cached.
func ABI() int { return abiOnce() }

var abiOnce = sync.OnceValue(func() int {
	v, err := createRuleset(nil, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if err != nil {
		return 0 // ENOSYS: not built in; EOPNOTSUPP: disabled at boot
	}
	return v
})

// Restrict applies p to the calling thread and returns the ABI it used.
//
// Every filesystem right the running ABI knows is handled, so anything the
// rules do not grant is denied; rights the ABI lacks are dropped from the
// rules (see [Policy.Unenforced]). A rule whose path does not exist is an
// error naming the path (errors.Is(err, fs.ErrNotExist) holds).
//
// Preconditions: no_new_privs is set on the calling thread (or the thread
// has CAP_SYS_ADMIN in its user namespace). Landlock restricts only the
// calling thread, so Restrict locks the calling goroutine to its OS thread
// for good once the domain is in force: the caller must exec the sandboxed
// program from this goroutine and never call runtime.UnlockOSThread.
//
// Returns an error wrapping [ErrUnsupported] when [ABI] is 0.
func Restrict(p Policy) (abi int, err error) {
	fd, abi, err := Ruleset(p)
	if err != nil {
		return abi, err
	}
	defer unix.Close(fd)
	// Locked before the domain exists so no other goroutine ever runs on a
	// restricted thread; the lock is released only if nothing was applied.
	runtime.LockOSThread()
	if err := restrictSelf(fd, 0); err != nil {
		runtime.UnlockOSThread()
		return abi, restrictError(err)
	}
	return abi, nil
}

// Ruleset builds p's ruleset, as Restrict does, without enforcing it:
// for a process that enforces it on itself with landlock_restrict_self(2)
// (fd, flags 0), such as a raw child between its clone and its execve.
// The descriptor is close-on-exec; the caller closes it. It returns the
// ABI in use, and an error as Restrict's.
func Ruleset(p Policy) (fd, abi int, err error) {
	abi = ABI()
	if abi == 0 {
		return -1, 0, fmt.Errorf("restricting thread: %w", ErrUnsupported)
	}
	fd, err = newRuleset(p, abi)
	if err != nil {
		return -1, abi, err
	}
	for _, r := range p.Rules {
		if err := addPathRule(fd, r, abi); err != nil {
			unix.Close(fd)
			return -1, abi, err
		}
	}
	if p.Net != nil && abi >= 4 {
		if err := addNetRules(fd, p.Net); err != nil {
			unix.Close(fd)
			return -1, abi, err
		}
	}
	return fd, abi, nil
}

func newRuleset(p Policy, abi int) (int, error) {
	attr := rulesetAttr{handledAccessFS: uint64(handledFS(abi))}
	if p.Net != nil && abi >= 4 {
		attr.handledAccessNet = netBindTCP | netConnectTCP
	}
	if abi >= 6 {
		if p.ScopeSignals {
			attr.scoped |= scopeSignal
		}
		if p.ScopeAbstractUnix {
			attr.scoped |= scopeAbstractUnix
		}
	}
	fd, err := createRuleset(&attr, rulesetAttrSize(abi), 0)
	if err != nil {
		return -1, fmt.Errorf("creating landlock ruleset (ABI %d, fs %v): %w", abi, Access(attr.handledAccessFS), err)
	}
	return fd, nil
}

func addPathRule(rulesetFD int, r Rule, abi int) error {
	if unknown := r.Access &^ All; unknown != 0 {
		return fmt.Errorf("adding landlock rule for %s: unknown access bits %#x", r.Path, uint64(unknown))
	}
	fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("adding landlock rule for %s: %w", r.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("adding landlock rule for %s: %w", r.Path, err)
	}
	access := ruleAccess(r.Access, abi, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if access == 0 {
		return nil // the kernel rejects empty rules (ENOMSG); nothing to grant
	}
	if err := addPathBeneathRule(rulesetFD, fd, access); err != nil {
		return fmt.Errorf("adding landlock rule for %s (%v): %w", r.Path, access, err)
	}
	return nil
}

func addNetRules(rulesetFD int, n *NetPolicy) error {
	add := func(access uint64, op string, ports []uint16) error {
		for _, port := range ports {
			if err := addNetPortRule(rulesetFD, access, port); err != nil {
				return fmt.Errorf("adding landlock %s rule for port %d: %w", op, port, err)
			}
		}
		return nil
	}
	if err := add(netBindTCP, "tcp bind", n.BindTCP); err != nil {
		return err
	}
	return add(netConnectTCP, "tcp connect", n.ConnectTCP)
}

func restrictError(err error) error {
	if errors.Is(err, unix.EPERM) {
		if nnp, perr := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); perr == nil && nnp == 0 {
			return fmt.Errorf("enforcing landlock ruleset: no_new_privs not set: %w", err)
		}
	}
	return fmt.Errorf("enforcing landlock ruleset: %w", err)
}
