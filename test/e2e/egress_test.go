package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// The egress tests run servers on 127.0.0.2 and 127.0.0.3: loopback of the
// host, which the proxy refuses unless a rule names it, and outside the
// sandboxes' NO_PROXY list (which keeps 127.0.0.1 for the sandbox's own
// loopback).

// httpServer serves "hello from ADDR" on addr:0 and returns its address.
func httpServer(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", ln.Addr())
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// echoServer echoes one line per connection.
func echoServer(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("echo:" + line))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestEgressAllowlist(t *testing.T) {
	allowed := httpServer(t, "127.0.0.2")
	other := httpServer(t, "127.0.0.3")
	_, port, _ := net.SplitHostPort(allowed)
	forEachMode(t, func(t *testing.T, m mode) {
		flags := []string{"--input", attackDir, "--allow-host", allowed}
		t.Run("curl plain HTTP", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "curl", "-sS", "http://"+allowed+"/")...), 0, "hello from "+allowed)
		})
		t.Run("curl CONNECT", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "curl", "-sS", "--proxytunnel", "http://"+allowed+"/")...), 0, "hello from "+allowed)
		})
		t.Run("go client", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "/workspace/input/attack", "http", "http://"+allowed+"/")...), 0, "status 200 body hello from")
		})
		t.Run("go client CONNECT", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "/workspace/input/attack", "tunnel", allowed)...), 0, "status 200 body hello from")
		})
		t.Run("curl SOCKS5", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "sh", "-c", `curl -sS --proxy "$ALL_PROXY" http://`+allowed+`/`)...), 0, "hello from "+allowed)
		})
		t.Run("node CONNECT", func(t *testing.T) {
			js := `const u = new URL(process.env.HTTPS_PROXY);
const req = require('http').request({host: u.hostname, port: u.port, method: 'CONNECT', path: '` + allowed + `'});
req.on('connect', (res, sock) => { if (res.statusCode !== 200) { console.log('connect', res.statusCode); process.exit(1); }
  sock.write('GET / HTTP/1.1\r\nHost: ` + allowed + `\r\nConnection: close\r\n\r\n'); let b=''; sock.on('data', d => b += d); sock.on('end', () => console.log(b.split('\r\n\r\n')[1])); });
req.on('error', e => { console.log('error', e.message); process.exit(1); }); req.end();`
			want(t, m.exec(t, "", append(flags, "--", "node", "-e", js)...), 0, "hello from")
		})
		t.Run("python urllib", func(t *testing.T) {
			want(t, m.exec(t, "", append(flags, "--", "python3", "-c",
				"import urllib.request; print(urllib.request.urlopen('http://"+allowed+"/', timeout=10).read().decode())")...), 0, "hello from")
		})
		t.Run("node through the proxy", func(t *testing.T) {
			// Node 20's fetch and http ignore proxy variables: a client
			// that wants the network speaks to the proxy itself.
			js := `const u = new URL(process.env.HTTP_PROXY);
require('http').get({host: u.hostname, port: u.port, path: 'http://` + allowed + `/'}, r => { let b=''; r.on('data', d => b += d); r.on('end', () => console.log(r.statusCode, b)); }).on('error', e => { console.log('error', e.message); process.exit(1); });`
			want(t, m.exec(t, "", append(flags, "--", "node", "-e", js)...), 0, "200 hello from")
		})
		denied := map[string]string{
			"host not on the list":   "http://" + other + "/",
			"metadata address":       "http://169.254.169.254/latest/meta-data/",
			"host loopback":          "http://127.0.0.1:" + port + "/",
			"mapped IPv6 loopback":   "http://[::ffff:127.0.0.1]:" + port + "/",
			"decimal IP spelling":    "http://2130706433:" + port + "/",
			"octal IP spelling":      "http://0177.0.0.1:" + port + "/",
			"private range":          "http://10.0.0.1/",
			"metadata by name":       "http://metadata.google.internal/",
			"allowed IP, wrong port": "http://127.0.0.2:1/",
		}
		for name, url := range denied {
			t.Run("denied "+name, func(t *testing.T) {
				// --noproxy "" overrides no_proxy, so 127.0.0.1 goes through
				// the proxy too (whose answer is what is tested).
				r := m.exec(t, "", append(flags, "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--noproxy", "", "--max-time", "10", url)...)
				if strings.Contains(r.stdout, "hello from") || !strings.Contains(r.stdout, "403") {
					t.Fatalf("%s: want the proxy's 403\n%s", url, r)
				}
				if !strings.Contains(r.stderr, "egress denied") {
					t.Fatalf("denial not reported on stderr\n%s", r)
				}
			})
		}
		t.Run("direct connection bypassing the proxy", func(t *testing.T) {
			r := m.exec(t, "", append(flags, "--", "curl", "-sS", "--noproxy", "*", "--max-time", "5", "http://"+allowed+"/")...)
			if r.code == 0 || strings.Contains(r.stdout, "hello from") {
				t.Fatalf("reached the host without the proxy\n%s", r)
			}
		})
	})
}

func TestEgressForward(t *testing.T) {
	target := echoServer(t, "127.0.0.2")
	other := echoServer(t, "127.0.0.3")
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  db:
    command: [x]
    network:
      forward: [{listen: "127.0.0.1:15432", to: %q}]
`, target), 0o644)
		want(t, m.exec(t, "", "--policy", cfg, "--input", attackDir, "--", "/workspace/input/attack", "echo", "127.0.0.1:15432"), 0, `echoed "echo:ping\n"`)
		// A forward may listen below 1024 without any egress rule (the
		// init then holds CAP_NET_BIND_SERVICE for it alone).
		low := filepath.Join(dir, "low.yaml")
		m.writeFile(t, low, fmt.Sprintf(`version: 1
servers:
  db:
    command: [x]
    network:
      forward: [{listen: "127.0.0.1:443", to: %q}]
`, target), 0o644)
		want(t, m.exec(t, "", "--policy", low, "--input", attackDir, "--", "/workspace/input/attack", "echo", "127.0.0.1:443"), 0, `echoed "echo:ping\n"`)
		// The forward reaches its target only: the proxy itself allows
		// nothing else.
		r := m.exec(t, "", "--policy", cfg, "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_connect}", "--proxytunnel", "--max-time", "10", "http://"+other+"/")
		if !strings.Contains(r.stdout, "403") || !strings.Contains(r.stderr, "egress denied") {
			t.Fatalf("a forward rule opened more than its target\n%s", r)
		}
	})
}

// TestEgressHostAddress: even "any host" does not include this machine's
// own addresses, which reach every service it binds to 0.0.0.0.
func TestEgressHostAddress(t *testing.T) {
	addrs := hostAddrs(t)[1:] // the non-loopback ones
	if len(addrs) == 0 {
		t.Skip("no non-loopback address")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, a := range addrs {
			r := m.exec(t, "", "--allow-host", "*", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "http://"+a+"/")
			if !strings.Contains(r.stdout, "403") || !strings.Contains(r.stderr, "this host") {
				t.Fatalf("the host's own address %s through --allow-host '*':\n%s", a, r)
			}
		}
	})
}

// TestEgressHostLoopbackService: "--allow-host 127.0.0.1:PORT" reaches
// the host's local service with an ordinary client (the rule takes
// 127.0.0.1 off NO_PROXY), and nothing else of the host's loopback.
func TestEgressHostLoopbackService(t *testing.T) {
	svc := httpServer(t, "127.0.0.1")
	other := httpServer(t, "127.0.0.1")
	forEachMode(t, func(t *testing.T, m mode) {
		want(t, m.exec(t, "", "--allow-host", svc, "--", "curl", "-sS", "--max-time", "10", "http://"+svc+"/"), 0, "hello from "+svc)
		r := m.exec(t, "", "--allow-host", svc, "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "http://"+other+"/")
		if !strings.Contains(r.stdout, "403") {
			t.Fatalf("another host loopback port reached:\n%s", r)
		}
	})
}
