//go:build !linux

package e2e

import "errors"

// The end-to-end tests run sandboxes, which need Linux (sys_linux_test.go);
// elsewhere these fail, so that the package builds but nothing passes
// that did not run.

var errNeedsLinux = errors.New("the end-to-end tests need Linux")

func inotifyInit() (int, error)                { return -1, errNeedsLinux }
func mountTmpfs(dir, opts string) error        { return errNeedsLinux }
func unmountDetach(dir string) error           { return errNeedsLinux }
func setSubreaper(bool) error                  { return errNeedsLinux }
func killPid(pid int, still func() bool) error { return errNeedsLinux }

const waitAll = 0
