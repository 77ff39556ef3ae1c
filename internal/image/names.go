package image

import (
	"fmt"
	"path"
	"strings"
)

// cleanName turns an entry name into a clean path relative to the root:
// a leading "/" is dropped (as docker does), "." for the root itself; a
// ".." component anywhere is refused.
func cleanName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("name holds a NUL byte: %w", ErrHostile)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("name %q has a \"..\" component: %w", name, ErrHostile)
		}
	}
	n := path.Clean("/" + name)
	if n == "/" {
		return ".", nil
	}
	return n[1:], nil
}
