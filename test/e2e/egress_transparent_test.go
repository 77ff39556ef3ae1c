package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lowPortServer serves "hello from ADDR" on ip at a free port below 1024
// (the ports transparent egress serves), or skips.
func lowPortServer(t *testing.T, ip string) string {
	t.Helper()
	return lowPortServe(t, ip, nil, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Context().Value(http.LocalAddrContextKey))
	})
}

// lowPortServe serves h on ip at a free port below 1024, over TLS with
// cert if non-nil, and returns its address; it skips if there is none.
func lowPortServe(t *testing.T, ip string, cert *tls.Certificate, h http.HandlerFunc) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("binding a port below 1024 needs root")
	}
	for p := 900; p < 1024; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
		if cert != nil {
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
			go srv.ServeTLS(ln, "", "")
		} else {
			go srv.Serve(ln)
		}
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	t.Skipf("no free port below 1024 on %s", ip)
	return ""
}

// withHosts returns a mode that runs m's mcpbox in a mount namespace of
// its own whose /etc/hosts adds lines, so that the egress proxy in mcpbox
// resolves test names to loopback servers. The sandbox's own /etc/hosts
// is mcpbox's, so inside it the names are looked up by DNS.
func withHosts(t *testing.T, m mode, lines string) mode {
	t.Helper()
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	dir := m.dir(t)
	m.writeFile(t, filepath.Join(dir, "hosts"), string(hosts)+"\n"+lines, 0o644)
	user := ""
	if !m.root() {
		user = fmt.Sprintf("setpriv --reuid=%d --regid=%d --clear-groups ", m.uid, m.uid)
	}
	bin := mcpboxBin
	if m.bin != "" {
		bin = m.bin
	}
	wrapper := filepath.Join(dir, "mcpbox-hosts")
	m.writeFile(t, wrapper, fmt.Sprintf(`#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' %s %s%s "$@"
`, filepath.Join(dir, "hosts"), user, bin), 0o755)
	// The wrapper starts as root and drops to m's user itself.
	return mode{name: m.name, uid: -1, flags: m.flags, bin: wrapper}
}

// TestEgressTransparent: a program that ignores the proxy variables (Node
// 20's fetch, curl --noproxy) reaches an allowed host by name on a port
// below 1024: the sandbox's DNS gives the name an address of the init's,
// the init hands the connection to the proxy with the name, and the proxy
// decides it as a CONNECT, so everything the allowlist refuses stays
// refused.
func TestEgressTransparent(t *testing.T) {
	allowed := lowPortServer(t, "127.0.0.2")
	other := lowPortServer(t, "127.0.0.3")
	_, port, _ := net.SplitHostPort(allowed)
	_, otherPort, _ := net.SplitHostPort(other)
	// other.test's port is a transparent one (unused.test's rule names
	// it), but no rule allows other.test.
	forEachMode(t, func(t *testing.T, m mode) {
		hm := withHosts(t, m, "127.0.0.2 upstream.test\n127.0.0.3 other.test\n169.254.169.254 metadata.test\n")
		cfg := filepath.Join(m.dir(t), "mcpbox.yaml")
		m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  x:
    command: [x]
    network:
      egress:
        - {host: upstream.test, cidr: 127.0.0.0/8, ports: [%s, 8080]}
        - {host: metadata.test, ports: [%s]}
        - {host: unused.test, ports: [%s]}
`, port, port, otherPort), 0o644)
		run := func(t *testing.T, script string) result {
			t.Helper()
			return hm.exec(t, "", "--policy", cfg, "--", "bash", "-c", script)
		}
		direct := "curl -sS --noproxy '*' --max-time 10 "
		t.Run("curl without the proxy", func(t *testing.T) {
			want(t, run(t, direct+"http://upstream.test:"+port+"/"), 0, "hello from "+allowed)
		})
		t.Run("node fetch without the proxy", func(t *testing.T) {
			js := `fetch("http://upstream.test:` + port + `/").then(r => r.text()).then(console.log, e => { console.log("error", e.cause || e); process.exit(1) })`
			want(t, run(t, "env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u NODE_USE_ENV_PROXY node -e '"+js+"'"), 0, "hello from "+allowed)
		})
		t.Run("the DNS survives garbage", func(t *testing.T) {
			want(t, run(t, `printf '\x00\x01\x01' > /dev/udp/127.0.0.1/53; head -c 600 /dev/urandom > /dev/udp/127.0.0.1/53; `+
				`printf '\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01' > /dev/udp/127.0.0.1/53; sleep 0.2; `+
				direct+"http://upstream.test:"+port+"/"), 0, "hello from "+allowed)
		})
		// Every refusal of the proxy holds on this path.
		for name, url := range map[string]string{
			"a name no rule allows":             "http://other.test:" + otherPort + "/",
			"an allowed name's blocked address": "http://metadata.test:" + port + "/",
		} {
			t.Run("denied "+name, func(t *testing.T) {
				r := run(t, direct+url)
				if r.code == 0 || strings.Contains(r.stdout, "hello from") {
					t.Fatalf("%s reached\n%s", url, r)
				}
				host := strings.Split(strings.TrimPrefix(url, "http://"), ":")[0]
				if !strings.Contains(r.stderr, "egress denied: "+host) {
					t.Fatalf("denial of %s not reported\n%s", host, r)
				}
			})
		}
		t.Run("only names' addresses, only the low ports", func(t *testing.T) {
			// An address the DNS gave no name, and an allowed name on an
			// allowed port above 1023 (a port the workload could bind
			// itself, so transparent egress leaves it alone).
			r := run(t, `a=$(getent hosts upstream.test | cut -d' ' -f1) && echo "addr $a" && `+
				direct+"http://127.128.0.250:"+port+"/; echo rc=$?; "+direct+`"http://$a:8080/"; echo rc=$?`)
			if strings.Contains(r.stdout, "hello from") || !strings.Contains(r.stdout, "addr 127.128.") ||
				strings.Count(r.stdout, "rc=0") != 0 || !strings.Contains(r.stdout, "rc=7") {
				t.Fatalf("want both connections refused or closed\n%s", r)
			}
		})
		t.Run("the workload holds none of the init's capabilities", func(t *testing.T) {
			// The init binds the low ports with CAP_NET_BIND_SERVICE; the
			// workload has no capability and cannot bind one itself.
			r := run(t, `grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; `+
				`python3 -c 'import socket; socket.socket().bind(("127.0.0.1", 81))' 2>&1 | tail -1`)
			caps := strings.Count(r.stdout, ":\t0000000000000000")
			if caps != 5 || !strings.Contains(r.stdout, "Permission denied") {
				t.Fatalf("want five empty capability sets and the bind refused\n%s", r)
			}
		})
		t.Run("no rules, no DNS", func(t *testing.T) {
			r := hm.exec(t, "", "--", "getent", "hosts", "upstream.test")
			if r.code == 0 {
				t.Fatalf("a sandbox without egress resolved a name\n%s", r)
			}
		})
	})
}

// TestEgressTransparentInject: secrets at the proxy work for a client
// that ignores the proxy variables too. Node's fetch, without them, calls
// an HTTPS API by name on a low port holding only the placeholder; the
// proxy, handed the connection by the init as a CONNECT to that name,
// terminates TLS with its CA (which Node trusts through
// NODE_EXTRA_CA_CERTS), puts the real token in, and redacts the API's
// echo of it.
func TestEgressTransparentInject(t *testing.T) {
	caPEM, cert := injCAFor(t, "api.test")
	realT := injToken(t)
	api := lowPortServe(t, "127.0.0.2", cert, injAPIHandler(realT))
	_, port, _ := net.SplitHostPort(api)
	forEachMode(t, func(t *testing.T, m mode) {
		hm := withHosts(t, m, "127.0.0.2 api.test\n")
		dir := m.dir(t)
		caFile := filepath.Join(dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  s:
    command: [x]
    network: {egress: [{host: api.test, cidr: 127.0.0.0/8, ports: [%s]}]}
    secrets:
      T: {from: env:INJ_T, inject: {hosts: ["api.test:%s"], header: Authorization, format: "Bearer {value}"}}
`, port, port), 0o644)
		js := `fetch("https://api.test:` + port + `/", {headers: {Authorization: "Bearer " + process.env.T}}).then(r => r.text()).then(console.log, e => { console.log("error", e.cause || e); process.exit(1) })`
		cmd := hm.command(t.Context(), append(append([]string{"exec", "--policy", cfg}, hm.flags...), "--", "sh", "-c",
			"env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy -u NODE_USE_ENV_PROXY node -e '"+js+"'")...)
		cmd.Env = append(cmd.Env, "INJ_T="+realT, "SSL_CERT_FILE="+caFile)
		out, err := cmd.CombinedOutput()
		got := string(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		if !strings.Contains(got, "hello; you sent Bearer [REDACTED:T]") || strings.Contains(got, realT) {
			t.Fatalf("want the API's answer with the echoed token redacted:\n%s", got)
		}
	})
}

// floodConnections waits for /workspace/input/go, opens N non-blocking
// connections to HOST:PORT (a name or an address) and holds them for 2 s,
// prints "done N", closes them, and fetches http://upstream.test:UPORT/
// through PROXY ("" for none) and prints the answer, trying for up to 15 s.
const floodConnections = `import os, resource, socket, sys, time, urllib.request
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port, n, uport, proxy = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
addr = socket.gethostbyname(host)
for i in range(400):
    if os.path.exists("/workspace/input/go"):
        break
    time.sleep(0.05)
socks = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect((addr, port))
    except OSError:
        pass
    socks.append(s)
time.sleep(2)
print("done", len(socks), flush=True)
for s in socks:
    s.close()
# The proxy still works off the flood's queued connections (past its
# connection limit it refuses new ones): egress must come back within 15 s.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy} if proxy else {}))
for i in range(30):
    try:
        print(opener.open("http://upstream.test:" + uport + "/", timeout=10).read().decode())
        break
    except OSError as e:
        print("fetch failed:", e, flush=True)
        time.sleep(0.5)
`

// TestEgressHandoverFlood: a flood of connections while the proxy does
// not accept (mcpbox stopped with SIGSTOP, as a busy host may stall it)
// leaves the init within its thread budget, with six forwards: each
// hand-over blocks a thread in connect(2) once the proxy socket's backlog
// is full, so the init hands over at most a few at once and lets the rest
// wait in its listeners' backlogs, and one goroutine serves every
// listener. Before, it started one thread per connection and one per
// forward, and died when the sandbox's pids limit refused one (the whole
// sandbox ended: "fatal error: newosproc"). Both kinds of listener: the
// proxy port and a transparent one. Egress works again afterwards.
func TestEgressHandoverFlood(t *testing.T) {
	upstream := lowPortServer(t, "127.0.0.2")
	_, port, _ := net.SplitHostPort(upstream)
	m := mode{name: "root", uid: -1}
	hm := withHosts(t, m, "127.0.0.2 upstream.test\n")
	for name, target := range map[string][]string{
		"transparent port": {"upstream.test", port, ""},
		"proxy port":       {"127.0.0.1", "3128", "http://127.0.0.1:3128"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := m.dir(t)
			cfg := filepath.Join(dir, "mcpbox.yaml")
			var forwards []string
			for i := range 6 {
				forwards = append(forwards, fmt.Sprintf(`{listen: "127.0.0.%d:5432", to: %q}`, 10+i, upstream))
			}
			m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  x:
    command: [x]
    network:
      egress: [{host: upstream.test, cidr: 127.0.0.0/8, ports: [%s]}]
      forward: [%s]
`, port, strings.Join(forwards, ", ")), 0o644)
			m.writeFile(t, filepath.Join(dir, "flood.py"), floodConnections, 0o644)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := hm.command(ctx, "exec", "--policy", cfg, "--input", dir, "--",
				"python3", "/workspace/input/flood.py", target[0], target[1], "6000", port, target[2])
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The wrapper execs mcpbox in its own process: cmd's pid is
			// mcpbox's, the init its child.
			pid := cmd.Process.Pid
			var init int
			for deadline := time.Now().Add(10 * time.Second); init == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				init = childNamed(t, pid, "mcpbox-init")
			}
			if init == 0 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("no mcpbox-init under mcpbox within 10s")
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			m.writeFile(t, filepath.Join(dir, "go"), "", 0o644) // the flood begins
			// 3 s of the flood, longer (up to 20 s) until a hand-over is
			// seen waiting: on a loaded machine the flood starts slowly.
			peak, blocked := 0, false
			for start := time.Now(); time.Since(start) < 3*time.Second || !blocked && time.Since(start) < 20*time.Second; {
				n, ok := taskCount(init)
				if !ok {
					break
				}
				peak = max(peak, n)
				blocked = blocked || waitsForProxy(init)
			}
			syscall.Kill(pid, syscall.SIGCONT)
			err := cmd.Wait()
			t.Logf("the init's threads peaked at %d; %s", peak, strings.TrimSpace(out.String()))
			if !blocked {
				t.Errorf("no hand-over waited for the stopped proxy: the flood did not test the bound")
			}
			if peak > 16 { // initTasks: the init's share of the pids limit
				t.Errorf("the init ran %d threads, over the 16 it keeps under the sandbox's pids limit", peak)
			}
			if err != nil || !strings.Contains(out.String(), "done 6000") || !strings.Contains(out.String(), "hello from") {
				tail := errb.String()
				if len(tail) > 2000 {
					tail = tail[len(tail)-2000:]
				}
				t.Errorf("the flooding workload did not finish, or its fetch after the flood failed: %v, %q\nstderr (end):\n%s", err, out.String(), tail)
			}
		})
	}
}

// waitsForProxy reports whether a thread of pid waits in connect(2) for
// room in a unix socket's backlog: a hand-over to a proxy that does not
// accept.
func waitsForProxy(pid int) bool {
	chans, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	for _, f := range chans {
		if b, _ := os.ReadFile(f); string(b) == "unix_wait_for_peer" {
			return true
		}
	}
	return false
}

// childNamed returns the pid of a child of pid whose comm is name, or 0.
func childNamed(t *testing.T, pid int, name string) int {
	for _, c := range childrenOf(t, pid) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c))
		if strings.TrimSpace(string(comm)) == name {
			return c
		}
	}
	return 0
}

// taskCount is the number of threads of pid; false once it is gone.
func taskCount(pid int) (int, bool) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(ents), err == nil
}
