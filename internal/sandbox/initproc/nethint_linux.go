package initproc

import (
	"bufio"
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox without egress rules has no network: a name lookup fails at
// once ("Could not resolve host", EAI_AGAIN), a connection to an address
// finds no route. Programs rarely say why, and a user new to mcpbox reads
// it as a broken network. When such a sandbox's command fails (exits
// with a status from 1 to 127, and the init passed on no SIGTERM, SIGINT,
// SIGHUP or SIGQUIT: those ends are someone's stop), the init reads its
// network namespace's own counters (fresh with the sandbox, so only the
// workload moved them) and, if the command tried the network, says so on
// its stderr: the terminal for `mcpbox exec`, the server's stderr lines in
// serve's log. Nothing is read while the command
// runs or when it succeeds, so it costs a start nothing.

// netHint is the line to print after a failed command in a sandbox with
// no network, or "" when the command did not try to use the network.
// snmp and snmp6 are /proc/net/snmp and /proc/net/snmp6.
func netHint(snmp, snmp6 []byte) string {
	what := NetTried(NetTries(snmp, snmp6))
	if what == "" {
		return ""
	}
	return "mcpbox: the command tried the network (" + what +
		"), but this sandbox has none (to allow a host: --allow-host HOST, or network.egress in the server's config)\n"
}

// NetTries counts what the processes of a sandbox without a network
// tried of it, from its namespace's /proc/net/snmp and snmp6 (fresh with
// the sandbox, so only they moved them). A lookup is a UDP query to
// 127.0.0.1:53 (resolv.conf names no server), where nothing listens:
// NoPorts (any datagram to a closed port of the sandbox's loopback
// counts; in practice, DNS). A connection or datagram to any other
// address finds no route: OutNoRoutes.
func NetTries(snmp, snmp6 []byte) (queries, noRoute uint64) {
	queries = snmpValue(snmp, "Udp", "NoPorts") + snmp6Value(snmp6, "Udp6NoPorts")
	noRoute = snmpValue(snmp, "Ip", "OutNoRoutes") + snmp6Value(snmp6, "Ip6OutNoRoutes")
	return queries, noRoute
}

// snmpValue reads a counter of /proc/net/snmp, where each protocol has a
// line of names followed by a line of values: "Udp: InDatagrams NoPorts
// ..." then "Udp: 0 4 ...". 0 when absent or malformed.
func snmpValue(snmp []byte, proto, name string) uint64 {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != proto+":" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i, n := range names {
			if n == name && i < len(fields) {
				v, _ := strconv.ParseUint(fields[i], 10, 64)
				return v
			}
		}
		return 0
	}
	return 0
}

// snmp6Value reads a counter of /proc/net/snmp6: "Udp6NoPorts  4" lines.
func snmp6Value(snmp6 []byte, name string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(snmp6))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == name {
			v, _ := strconv.ParseUint(fields[1], 10, 64)
			return v
		}
	}
	return 0
}

// hintWait bounds the hint's write: the init must exit whatever the
// workload left its stderr in (a pipe no one reads, a terminal whose
// output it stopped).
const hintWait = 200 * time.Millisecond

// hintNoNetwork prints netHint for the sandbox's namespace, if any. Best
// effort: a counter that cannot be read says nothing, and a write that
// does not finish within hintWait is left behind at the init's exit.
// SIGTTOU is ignored first: a workload that made its own process group
// the terminal's foreground, with TOSTOP set, would otherwise have the
// kernel stop the write and restart it for ever.
func hintNoNetwork() {
	snmp, _ := os.ReadFile("/proc/net/snmp")
	snmp6, _ := os.ReadFile("/proc/net/snmp6")
	h := netHint(snmp, snmp6)
	if h == "" {
		return
	}
	signal.Ignore(unix.SIGTTOU)
	done := make(chan struct{})
	go func() {
		// Not through os.Stderr: on EPIPE (no reader left) Go raises
		// SIGPIPE for a write to stderr, and with SIGPIPE not caught the
		// init would exit with status 2 instead of the workload's. A
		// terminal may take less than the whole hint at a time.
		for b := []byte(h); len(b) > 0; {
			n, err := unix.Write(2, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				break
			}
			b = b[n:]
		}
		close(done)
	}()
	t := time.NewTimer(hintWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
