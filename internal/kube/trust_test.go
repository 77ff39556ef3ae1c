package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const testCAPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// TestPodTrust: with TrustCA the pod gets the trust init container on
// the server's image, run by the server's agent, hardened as the server,
// given the CA (and nothing else) in its environment and only the trust
// volume (writable); the server's container mounts that volume read-only
// at TrustDir and its bundle read-only over every system bundle path;
// the order is the agent's copy, the trust, the install. Without TrustCA
// nothing of it is there.
func TestPodTrust(t *testing.T) {
	for _, copied := range []bool{false, true} {
		o := PodOptions{Name: "p", Gateway: "gw1", Server: "s", Scope: "abc", Owner: testOwner(),
			Image: "reg.example/srv:1", Command: AgentCommand("/usr/local/bin/mcpbox", []string{"srv"}),
			TLSSecret: "p-tls", Limits: Limits{CPU: 1, Memory: 1 << 30}, TrustCA: []byte(testCAPEM),
			Install: &Install{Image: "reg.example/srv:1", ConfigMap: "p-pkg", AgentPath: "/usr/local/bin/mcpbox"}}
		agent, want := "/usr/local/bin/mcpbox", []string{TrustContainer, InstallContainer}
		if copied {
			o.Command = AgentCommand(AgentBin, []string{"srv"})
			o.Install.AgentPath = AgentBin
			o.Agent = &AgentCopy{Image: "reg.example/agent:1", Path: "/mcpbox"}
			agent, want = AgentBin, []string{AgentContainer, TrustContainer, InstallContainer}
		}
		p := Pod(o)
		var names []string
		for _, c := range p.Spec.InitContainers {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, want) {
			t.Fatalf("copied=%v: init containers %q, want %q", copied, names, want)
		}
		tc, srv := p.Spec.InitContainers[len(want)-2], p.Spec.Containers[0]
		if tc.Image != o.Image || strings.Join(tc.Command, " ") != agent+" agent --trust-dir "+TrustDir {
			t.Errorf("trust container runs %s %q; want the server's image and agent", tc.Image, tc.Command)
		}
		if len(tc.Env) != 1 || tc.Env[0].Name != TrustCAEnv || tc.Env[0].Value != testCAPEM || tc.Env[0].ValueFrom != nil {
			t.Errorf("trust container's env %+v: want the CA certificate only", tc.Env)
		}
		sc := tc.SecurityContext
		if sc == nil || sc == srv.SecurityContext || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
			!*sc.RunAsNonRoot || *sc.RunAsUser != RunAsUser || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			len(sc.Capabilities.Add) != 0 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("trust container's security context: %+v", sc)
		}
		if lim := tc.Resources.Limits; lim.Memory().Value() == 0 || lim.Cpu().MilliValue() == 0 || lim.StorageEphemeral().Value() == 0 {
			t.Errorf("trust container's limits: %+v", tc.Resources)
		}
		var trustMounts []string
		for _, vm := range tc.VolumeMounts {
			if vm.Name == "trust" && (vm.MountPath != TrustDir || vm.ReadOnly || vm.SubPath != "") {
				t.Errorf("trust container mounts %+v; want the volume writable at %s", vm, TrustDir)
			}
			trustMounts = append(trustMounts, vm.Name)
		}
		if wantM := []string{"trust"}; copied {
			if !slices.Equal(trustMounts, []string{"trust", "agent"}) {
				t.Errorf("trust container mounts %q, want the trust volume and the agent", trustMounts)
			}
		} else if !slices.Equal(trustMounts, wantM) {
			t.Errorf("trust container mounts %q, want the trust volume only (no secrets, no TLS)", trustMounts)
		}
		over := map[string]bool{}
		for _, vm := range srv.VolumeMounts {
			if vm.Name != "trust" {
				continue
			}
			if !vm.ReadOnly {
				t.Errorf("server mounts %+v writable", vm)
			}
			switch {
			case vm.MountPath == TrustDir && vm.SubPath == "":
			case vm.SubPath == TrustBundleName:
				over[vm.MountPath] = true
			default:
				t.Errorf("server mounts %+v", vm)
			}
		}
		for _, b := range SystemBundles {
			if !over[b] {
				t.Errorf("the bundle is not mounted over %s", b)
			}
		}
		if len(over) != len(SystemBundles) {
			t.Errorf("the bundle is mounted over %d paths, want %d", len(over), len(SystemBundles))
		}
		for _, c := range p.Spec.InitContainers {
			if c.Name == TrustContainer {
				continue
			}
			for _, vm := range c.VolumeMounts {
				if vm.Name == "trust" {
					t.Errorf("%s mounts the trust volume", c.Name)
				}
			}
		}
		var vol *corev1.Volume
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == "trust" {
				vol = &p.Spec.Volumes[i]
			}
		}
		if vol == nil || vol.EmptyDir == nil || vol.EmptyDir.Medium != corev1.StorageMediumMemory ||
			vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Value() != TrustVolumeSize {
			t.Errorf("trust volume: %+v", vol)
		}
		if s := srv.SecurityContext; !*s.ReadOnlyRootFilesystem || !*s.RunAsNonRoot || *s.AllowPrivilegeEscalation {
			t.Errorf("the server's hardening changed: %+v", s)
		}
	}
	p := Pod(PodOptions{Name: "p", Image: "img", Command: AgentCommand("/mcpbox", []string{"srv"}), TLSSecret: "t"})
	for _, v := range p.Spec.Volumes {
		if v.Name == "trust" {
			t.Error("a pod without TrustCA has the trust volume")
		}
	}
	for _, vm := range p.Spec.Containers[0].VolumeMounts {
		if strings.HasPrefix(vm.MountPath, "/etc/") {
			t.Errorf("a pod without TrustCA mounts %s", vm.MountPath)
		}
	}
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("a pod without TrustCA has init containers %d", len(p.Spec.InitContainers))
	}
}
