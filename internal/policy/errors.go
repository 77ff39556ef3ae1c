package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownServer and ErrUnknownClient are the reasons for denying a call
// that names a server or client the config does not list.
var (
	ErrUnknownServer = errors.New("unknown server")
	ErrUnknownClient = errors.New("unknown client")
)

// Problem is one error in a config's policy, located at File:Line:Col
// (1-based; zero when the config did not come from a file).
type Problem struct {
	File      string
	Line, Col int
	Msg       string
}

// String formats p as "FILE:LINE:COL: message", leaving out unknown parts.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File + ":")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", p.Line, p.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Errors is every problem Compile found, in config order.
type Errors struct {
	Problems []Problem
}

// Error joins the problems one per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
