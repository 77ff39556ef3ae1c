//go:build !linux

package dashboard

import (
	"errors"
	"io"
)

func workspaceDiff(io.Writer, string, string) error {
	return errors.New("workspace diffs need Linux")
}
