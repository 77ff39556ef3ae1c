// Command keyholder adds a user key named by its argument to its process
// keyring, prints "holding true" when /proc/keys lists the key, or
// "holding false", and keeps the key until stdin closes: the host side of
// the /proc/keys attack in the e2e tests.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: keyholder DESCRIPTION")
		os.Exit(2)
	}
	// The process keyring belongs to this thread's credentials.
	runtime.LockOSThread()
	desc := os.Args[1]
	id, err := unix.AddKey("user", desc, []byte("secret"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		fmt.Fprintln(os.Stderr, "adding key:", err)
		os.Exit(1)
	}
	keys, err := os.ReadFile("/proc/keys")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading /proc/keys:", err)
	}
	fmt.Println("holding", bytes.Contains(keys, []byte(desc)))
	_, _ = io.Copy(io.Discard, os.Stdin)
	_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
}
