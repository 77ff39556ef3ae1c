package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/gateway"
	"mcpbox/internal/kube"
	"mcpbox/internal/kube/kubetest"
	"mcpbox/internal/launch"
	"mcpbox/internal/podagent"
)

// BenchmarkKubeStart measures what one scope's start costs on the
// kubernetes backend, for docs/kubernetes.md's capacity estimate: API
// requests per start and per stop, the time from Start to a served
// initialize, and the agent's and the server's resident memory in the
// pod. The baseline, measured in the same run on the same cluster, is a
// bare pod (sleep) from create to Running: "ratio" is how much longer a
// server's start takes than the cluster's own pod start.
func BenchmarkKubeStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the kubernetes test node needs root")
	}
	cl := kubetest.Shared(b)
	ns := kube.LabelValue(fmt.Sprintf("%s-%d", b.Name(), time.Now().UnixNano()), 40)
	cl.CreateNamespace(b, ns)
	cfg, err := kube.LoadKubeconfig(cl.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	client, err := kube.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gw, err := kube.Register(ctx, client, ns, "bench", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close(context.Background())
	ca, err := podagent.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	agent, bin := kubeBins(b)
	k, err := launch.NewKube(launch.KubeOptions{
		Name: "bench", Client: client, Namespace: ns, Gateway: gw,
		Pod: kube.PodOptions{Image: "x", Command: kube.AgentCommand(agent, []string{bin, "-name", "bench"}),
			Limits: kube.Limits{Memory: 256 << 20}},
		Issue: func(pod string) ([]byte, []byte, []byte, error) {
			c, k, err := ca.IssuePod(pod)
			return c, k, ca.CAPEM(), err
		},
		Connect: func(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) (mcp.Connection, error) {
			return podagent.Connect(ctx, addr, pod, ca, podagent.StartRequest{Env: env, Files: files})
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	var bare time.Duration
	var reqStart, reqStop, agentKiB, serverKiB int64
	var total time.Duration
	n := 0
	for b.Loop() {
		// The baseline: a bare pod (the same volumes, a TLS Secret made
		// before the clock starts) from create to Running.
		name := fmt.Sprintf("bare-%d", n)
		if err := client.Create(ctx, kube.Secrets, ns, kube.PodTLS(name+"-tls", "bench", "bare", gw.Ref(), []byte("c"), []byte("k"), []byte("ca")), nil); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := client.Create(ctx, kube.Pods, ns, kube.Pod(kube.PodOptions{Name: name, Gateway: "bench", Server: "bare",
			Owner: gw.Ref(), Image: "x", Command: []string{"/bin/sleep", "600"}, TLSSecret: name + "-tls"}), nil); err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		_, err := client.WatchPod(wctx, ns, name, func(p *corev1.Pod) (bool, error) {
			return p.Status.Phase == corev1.PodRunning, nil
		})
		wcancel()
		if err != nil {
			b.Fatal(err)
		}
		bare += time.Since(t0)
		_ = client.DeleteNow(ctx, kube.Pods, ns, name)
		_ = client.Delete(ctx, kube.Secrets, ns, name+"-tls")

		r0, t1 := client.Requests(), time.Now()
		in, err := k.Start(ctx, gateway.Scope{Agent: strconv.Itoa(n)})
		if err != nil {
			b.Fatal(err)
		}
		sess, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, connTransport{in.Process().Conn}, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(t1)
		reqStart += client.Requests() - r0
		pod := launch.PodName(in)
		if pid := cl.Node.ContainerPID(ns, pod, "server"); pid > 0 {
			agentKiB += rssKiB(pid)
			serverKiB += childrenRSSKiB(pid)
		}
		r1 := client.Requests()
		_ = sess.Close()
		in.Stop()
		reqStop += client.Requests() - r1
		n++
	}
	f := float64(n)
	b.ReportMetric(float64(reqStart)/f, "apireq/start")
	b.ReportMetric(float64(reqStop)/f, "apireq/stop")
	b.ReportMetric(total.Seconds()*1000/f, "ms/start")
	b.ReportMetric(bare.Seconds()*1000/f, "ms/barepod")
	b.ReportMetric(total.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(float64(agentKiB)/f, "agentKiB")
	b.ReportMetric(float64(serverKiB)/f, "serverKiB")
}

// connTransport hands an open connection to an mcp.Client.
type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// rssKiB is the resident memory of process pid.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// childrenRSSKiB is the resident memory of pid's children (the server
// the agent runs), forked by any of its threads.
func childrenRSSKiB(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				sum += rssKiB(c)
			}
		}
	}
	return sum
}
