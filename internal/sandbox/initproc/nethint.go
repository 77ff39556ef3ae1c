package initproc

import (
	"strconv"
	"strings"
)

// NetTried says what NetTries counted ("2 DNS queries, 1 packet with no
// route"), or "" for nothing.
func NetTried(queries, noRoute uint64) string {
	var what []string
	if queries > 0 {
		what = append(what, plural(queries, "DNS query", "DNS queries"))
	}
	if noRoute > 0 {
		what = append(what, plural(noRoute, "packet", "packets")+" with no route")
	}
	return strings.Join(what, ", ")
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatUint(n, 10) + " " + many
}
