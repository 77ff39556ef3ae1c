package instance

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PortHolder finds the process listening on TCP port (any address), for
// an error that says who holds a port: its pid and command name. ok is
// false if none of the processes this user may inspect has it (another
// user's, or none). Linux /proc only.
func PortHolder(port int) (pid int, comm string, ok bool) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, port, inodes)
	}
	if len(inodes) == 0 {
		return 0, "", false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join(p, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(p, "fd", fd.Name()))
			inode, isSock := strings.CutPrefix(link, "socket:[")
			if err != nil || !isSock || !inodes[strings.TrimSuffix(inode, "]")] {
				continue
			}
			pid, _ := strconv.Atoi(filepath.Base(p))
			b, _ := os.ReadFile(filepath.Join(p, "comm"))
			return pid, strings.TrimSpace(string(b)), true
		}
	}
	return 0, "", false
}

// listeningInodes adds the inodes of the sockets in the /proc/net/tcp
// style table file that listen on port.
func listeningInodes(file string, port int, into map[string]bool) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) || fields[3] != "0A" || fields[9] == "0" {
			continue
		}
		into[fields[9]] = true
	}
}
