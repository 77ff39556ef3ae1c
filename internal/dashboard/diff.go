package dashboard

import (
	"errors"
	"io"
)

// errTooBig ends a diff past maxDiff.
var errTooBig = errors.New("diff too big")

// limitWriter passes on at most n bytes, then fails with errTooBig.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.w.Write(p[:l.n])
		l.n = 0
		return 0, errTooBig
	}
	l.n -= len(p)
	return l.w.Write(p)
}
