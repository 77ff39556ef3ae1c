package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A download by curl inside a sandbox through the egress path (the init's
// 127.0.0.1:3128, the proxy, the upstream), start included, against curl
// on the host, from one loopback server in the same run. The ratio is
// sandbox throughput over host throughput (1 is line speed). Issue 19
// sizes it at 1 GiB:
//
//	MCPBOX_BENCH_BYTES=1073741824 go test ./test/e2e -run '^$' -bench EgressDownload -count 6
func BenchmarkEgressDownload(b *testing.B) {
	size := int64(64 << 20)
	if v := os.Getenv("MCPBOX_BENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("MCPBOX_BENCH_BYTES=%q: want a positive byte count", v)
		}
		size = n
	}
	addr := blobServer(b, size)
	url := "http://" + addr + "/blob"
	for _, tc := range []struct {
		name string
		args []string // curl options besides the URL
	}{
		{"plain", nil},                         // absolute-form GET via HTTP_PROXY
		{"connect", []string{"--proxytunnel"}}, // CONNECT tunnel, as HTTPS takes
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			var host, box, hostCPU, boxCPU time.Duration
			for b.Loop() {
				wall, cpu := timeRun(b, size, exec.Command("curl", append(append([]string{"--noproxy", "*"}, curlArgs...), url)...))
				host, hostCPU = host+wall, hostCPU+cpu
				wall, cpu = timeRun(b, size, exec.Command(mcpboxBin, append(append([]string{"exec", "--allow-host", addr, "--", "curl"},
					append(curlArgs, tc.args...)...), url)...))
				box, boxCPU = box+wall, boxCPU+cpu
			}
			b.ReportMetric(float64(host)/float64(box), "ratio")
			// CPU time of curl, and of mcpbox with its sandbox (the proxy
			// included), the server left out: steadier than wall time on a
			// busy machine.
			b.ReportMetric(float64(hostCPU)/float64(boxCPU), "cpu-ratio")
			b.ReportMetric(float64(size)*float64(b.N)/host.Seconds()/1e6, "host-MB/s")
			b.ReportMetric(float64(size)*float64(b.N)/box.Seconds()/1e6, "box-MB/s")
		})
	}
}

var curlArgs = []string{"-sS", "-o", "/dev/null", "-w", "%{size_download}", "--max-time", "120"}

// timeRun runs cmd, checks that curl got size bytes, and returns how long
// it took from start to exit and the CPU time it and its descendants
// used.
func timeRun(b *testing.B, size int64, cmd *exec.Cmd) (wall, cpu time.Duration) {
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v: %s", cmd.Args, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.FormatInt(size, 10) {
		b.Fatalf("%s: downloaded %q bytes, want %d", cmd.Args, got, size)
	}
	return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// blobServer serves size bytes (Content-Length framed) to every request on
// a loopback port, from one buffer, and returns its address.
func blobServer(b *testing.B, size int64) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() { cancel(); l.Close() })
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				defer stop()
				c.SetDeadline(time.Now().Add(2 * time.Minute))
				br := bufio.NewReader(c)
				for { // the request head
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size)
				for left := size; left > 0; {
					n := min(left, int64(len(chunk)))
					if _, err := c.Write(chunk[:n]); err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	return l.Addr().String()
}
