package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/launch"
)

// egressAudit follows the decision logs of this gateway's egress proxy
// pods in one namespace (GET pods/NAME/log?follow=true) and audits each
// decision as the pod's egress, as a local sandbox's proxy decisions
// are: the backend of the line's server finds the pod's instance (its
// scope and sandbox), so the record joins the call that ran then.
//
// The line's server and pod are the proxy's: it took them from the
// pod's verified token (egressproxy.Verify), not from anything the pod
// sent, and a pod cannot write into the proxy's log. A line whose pod no
// backend of its server started is not audited.
type egressAudit struct {
	mu     sync.Mutex
	sinks  map[string][]*launch.Kube // guarded by mu; by server name (a reload adds one)
	cancel context.CancelFunc        // guarded by mu; nil: not following
	done   chan struct{}
	denied sync.Once // the warning that the Role lacks pods/log
}

// add makes k the audit of its server's decisions, and starts following
// the proxy pods' logs the first time.
func (a *egressAudit) add(kc *kubeConn, server string, k *launch.Kube, log *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sinks == nil {
		a.sinks = map[string][]*launch.Kube{}
	}
	a.sinks[server] = append(a.sinks[server], k)
	if a.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	go func() {
		defer close(a.done)
		kc.client.FollowLogs(ctx, kube.FollowOptions{
			Namespace: kc.ns, Selector: kube.Selector(kc.gw.ID(), kube.RoleEgress), Container: "proxy",
			Accept: isProxyPod,
			Line:   func(pod string, b []byte) { a.line(pod, b, log) },
			Errors: func(pod string, err error) {
				if log == nil {
					return
				}
				if kube.IsForbidden(err) {
					// Silent, the egress audit would stay empty.
					a.denied.Do(func() {
						log.Warn("the egress proxy's decisions cannot be audited: the gateway may not read pod logs (get on pods/log); apply `mcpbox kube rbac`", "namespace", kc.ns, "err", err)
					})
					return
				}
				log.Debug("following the egress proxy's log", "namespace", kc.ns, "pod", pod, "err", err)
			},
		})
	}()
}

// isProxyPod: a pod of the proxy's ReplicaSet (its controller), not one
// that merely carries the labels.
func isProxyPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "ReplicaSet"
}

// line audits one line of a proxy pod's log.
func (a *egressAudit) line(proxyPod string, b []byte, log *slog.Logger) {
	var ln egressproxy.Line
	if err := json.Unmarshal(b, &ln); err != nil {
		return // not a decision (the proxy's own messages go to stderr)
	}
	if ln.Dropped > 0 && log != nil {
		log.Warn("the egress proxy dropped decision lines (its buffer was full); they are not audited",
			"proxy_pod", proxyPod, "dropped", ln.Dropped)
	}
	if ln.Server == "" || ln.Pod == "" {
		return
	}
	a.mu.Lock()
	sinks := a.sinks[ln.Server]
	a.mu.Unlock()
	if ln.Kind == egressproxy.KindSecret {
		for i := len(sinks) - 1; i >= 0; i-- {
			if sinks[i].SecretEvent(ln.Pod, ln.SecretEvent()) {
				return
			}
		}
		return
	}
	ev := ln.Event()
	for i := len(sinks) - 1; i >= 0; i-- {
		if sinks[i].Egress(ln.Pod, ev) {
			return
		}
	}
	if log != nil {
		log.Debug("an egress decision of no pod this gateway runs", "server", ln.Server, "pod", ln.Pod, "proxy_pod", proxyPod)
	}
}

// stop ends the following and waits for it.
func (a *egressAudit) stop() {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel = nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
