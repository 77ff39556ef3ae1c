package launch

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mcpbox/internal/kube"
)

// KubeInstall is how a package server's pods install its package: an
// init container (kube.Install) runs `npm ci --ignore-scripts` on the
// pinned lockfile, which the gateway puts into a ConfigMap.
type KubeInstall struct {
	// Package names the pin ("npm:NAME@VERSION") in errors.
	Package string
	// PackageJSON and Lockfile are the pinned tree's package.json and
	// package-lock.json (mcpbox.lock's kept lockfile).
	PackageJSON, Lockfile []byte
	// Env, if set, is the install's environment for pod: the egress
	// proxy's, with a token whose allowlist is the registry only, sent
	// over the install agent's mutual-TLS channel (never the pod spec).
	Env func(ctx context.Context, pod string) (map[string]string, error)
	// Files are written into the install's own memory-backed secrets dir
	// (kube.InstallSecretsDir) by its agent: the registries' npmrc.
	Files map[string][]byte
	// StartJob starts the install container's agent (podagent.StartJob).
	StartJob func(ctx context.Context, addr, pod string, env map[string]string, files map[string][]byte) error
}

// configMapName is the name of the package's ConfigMap: per gateway,
// server and lockfile (it is immutable; another pin is another map).
func (k *Kube) configMapName() string {
	in := k.o.Install
	return "mcpbox-" + k.o.Gateway.ID() + "-pkg-" + kube.LabelValue(k.o.Name, 30) + "-" +
		kube.ScopeHash(string(in.PackageJSON) + "\x00" + string(in.Lockfile))[:8]
}

// ensureConfigMap creates the package's ConfigMap; one of that name that
// exists must hold the same files (someone else's is refused, not used).
func (k *Kube) ensureConfigMap(ctx context.Context) (string, error) {
	in, name := k.o.Install, k.configMapName()
	cm := kube.PackageConfigMap(name, k.o.Gateway.ID(), k.o.Name, k.o.Gateway.Ref(), in.PackageJSON, in.Lockfile)
	err := k.o.Client.Create(ctx, kube.ConfigMaps, k.o.Namespace, cm, nil)
	if kube.IsAlreadyExists(err) {
		var have corev1.ConfigMap
		if err = k.o.Client.Get(ctx, kube.ConfigMaps, k.o.Namespace, name, &have); err == nil &&
			(have.Data["package.json"] != cm.Data["package.json"] || have.Data["package-lock.json"] != cm.Data["package-lock.json"]) {
			err = fmt.Errorf("configmap %s exists with other content", name)
		}
	}
	if err != nil {
		return "", fmt.Errorf("server %s: the package's lockfile: %w", k.o.Name, err)
	}
	return name, nil
}

// install starts pod's install container once the pod has an address,
// with the proxy's environment, and waits until the pod runs (the
// install completed): a failed install is an error naming the package,
// the install's status and the end of its log.
func (k *Kube) install(ctx context.Context, pod string) (*corev1.Pod, error) {
	c, ns, in := k.o.Client, k.o.Namespace, k.o.Install
	p, err := c.WatchPod(ctx, ns, pod, func(p *corev1.Pod) (bool, error) {
		if p.Status.PodIP != "" {
			return true, nil
		}
		return podReady(p)
	})
	if err != nil {
		return nil, k.installError(ctx, pod, err)
	}
	env := map[string]string{}
	if in.Env != nil {
		if env, err = in.Env(ctx, pod); err != nil {
			return nil, fmt.Errorf("server %s: the install's egress proxy: %w", k.o.Name, err)
		}
	}
	addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(kube.AgentPort))
	delay := 20 * time.Millisecond
	for {
		err = in.StartJob(ctx, addr, pod, env, in.Files)
		if err == nil || !isRefused(err) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
	if err != nil {
		return nil, k.installError(ctx, pod, err)
	}
	p, err = c.WatchPod(ctx, ns, pod, podReady)
	if err != nil {
		return nil, k.installError(ctx, pod, err)
	}
	return p, nil
}

// installError says how pod's install ended, if it did, with the end of
// its log; else err.
func (k *Kube) installError(ctx context.Context, pod string, err error) error {
	ctx = context.WithoutCancel(ctx)
	c, ns := k.o.Client, k.o.Namespace
	var p corev1.Pod
	if gerr := c.Get(ctx, kube.Pods, ns, pod, &p); gerr == nil {
		for _, cs := range p.Status.InitContainerStatuses {
			if t := cs.State.Terminated; cs.Name == kube.InstallContainer && t != nil && t.ExitCode != 0 {
				tail, _ := c.PodLogTail(ctx, ns, pod, kube.InstallContainer, 12)
				if r := k.o.Book.Redactor(); r != nil {
					tail = r.Bytes(tail)
				}
				return fmt.Errorf("server %s: installing %s in pod %s failed (exit status %d; npm ci installs only the pinned lockfile and checks every package's integrity against it): %s",
					k.o.Name, k.o.Install.Package, pod, t.ExitCode, oneLine(tail))
			}
		}
	}
	return fmt.Errorf("server %s: installing %s in pod %s: %w", k.o.Name, k.o.Install.Package, pod, err)
}

// oneLine joins a log tail's lines with " | ".
func oneLine(b []byte) string {
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, string(l))
		}
	}
	if len(out) == 0 {
		return "no log"
	}
	return strings.Join(out, " | ")
}
