package sandbox

import (
	"os"
	"strconv"

	"mcpbox/internal/sandbox/initproc"
)

// NetTries counts the DNS queries and packets with no route the
// sandbox's processes have sent since it started (initproc.NetTries),
// read from its network namespace through its init: for a sandbox without
// egress, whose namespace has loopback only, what they tried of the
// network they do not have. ok is false for a sandbox with egress (its
// namespace reaches the proxy) or when the counters cannot be read.
func (sb *Sandbox) NetTries() (queries, noRoute uint64, ok bool) {
	if sb.spec.Network.Enabled() || sb.cmd == nil || sb.cmd.Process == nil {
		return 0, 0, false
	}
	dir := "/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/net/"
	snmp, err := os.ReadFile(dir + "snmp")
	if err != nil {
		return 0, 0, false
	}
	snmp6, _ := os.ReadFile(dir + "snmp6") // none without IPv6
	queries, noRoute = initproc.NetTries(snmp, snmp6)
	return queries, noRoute, true
}
