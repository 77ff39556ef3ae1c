// Package kubetest runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver and kube-controller-manager (garbage collector,
// Deployment, ReplicaSet, service-account, root-CA publisher and namespace
// controllers) built by scripts/kube-bins.sh, on loopback ports with
// certificates generated per cluster, plus a test node that stands in for
// the scheduler, the kubelet and the container runtime.
//
//	c := kubetest.Start(t)          // ready, stopped in t.Cleanup
//	c.Kubeconfig                    // admin (system:masters)
//	c.UserKubeconfig(t, "alice")    // a user RBAC knows nothing of yet
//	c.Admin.Do(ctx, "POST", "/api/v1/namespaces/default/pods", pod, &out)
//
// The test node (node.go, pod.go, container.go) registers the Node
// NodeName, binds unscheduled pods whose nodeSelector matches its labels,
// and runs each container's command and args as a local process in mount,
// pid, uts and ipc namespaces of its own: the host's filesystem seen through a
// copy-on-write overlay (there are no images: every image is the host's
// root, less the paths Node.ImageWithout removed from it), the pod's
// volumes at their mountPaths (emptyDir, secret, configMap, projected with
// serviceAccountToken, downwardAPI, a PersistentVolumeClaim as a host
// directory per claim, hostPath), env with fieldRef, secretKeyRef and
// configMapKeyRef resolved, runAsUser/runAsGroup/fsGroup,
// allowPrivilegeEscalation: false (no_new_privs), capabilities drop ALL
// (the bounding set), readOnlyRootFilesystem and runAsNonRoot applied.
// Each pod gets its own IP in 127.N.0.0/16 as status.podIP, but the
// processes share the host's network namespace: a server binds its podIP
// (from the downward API) and reaches the host's loopback. It reports
// phase, conditions and container states, restarts containers as the
// restart policy says (back-off 1s to 10s), and on deletion sends SIGTERM
// to each container's pid 1, SIGKILL after the grace period (at most
// Options.MaxGrace), then removes the pod object with grace 0.
//
// What the test node does not emulate: NetworkPolicy (nothing enforces
// it: pods reach every loopback port), Services and kube-proxy (cluster
// IPs are numbers in 127.96.0.0/16 that route nowhere), DNS, image pulls
// and image entrypoints (a container needs a command), resource requests
// and limits (no cgroups), seccomp and AppArmor profiles, probes (a
// running container is Ready), affinity, taints and tolerations, PVC
// binding and provisioning (a claim must exist; it is then a directory),
// the kubelet's exec API (use Node.ContainerPID; the log API, GET
// pods/NAME/log with follow, is served, kubelet.go),
// node heartbeats (there is no node lifecycle controller to miss them).
// It needs root (mounts) and util-linux's unshare and setpriv.
package kubetest
