//go:build !linux

package daemon

import "os"

// IsTerminal reports whether v is an *os.File open on a character
// device, as near as this system tells a terminal apart without an ioctl.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
