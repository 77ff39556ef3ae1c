package cli

import (
	"mcpbox/internal/daemon"
	"mcpbox/internal/kube"
)

const kubeHelp = `USAGE
  mcpbox kube rbac [--namespace NS] [--subject USER|system:serviceaccount:NS:NAME]

Prints the gateway's Role and RoleBinding (kubernetes backend) as YAML.
`

func (e *env) kubeCmd(args []string) int {
	fs := e.newFlagSet("kube", kubeHelp)
	ns := fs.String("namespace", "mcp", "the namespace of the servers' pods")
	subject := fs.String("subject", "system:serviceaccount:mcp:mcpbox", "who the gateway runs as")
	if len(args) == 0 || args[0] != "rbac" {
		args = []string{"rbac", "--help"}
	}
	if code, stop := e.parse(fs, args[1:]); stop {
		return code
	}
	y, _ := kube.RBAC(*ns, *subject) // marshals API types: cannot fail
	e.stdout.Write(y)
	return 0
}

// kubeDoctor is `doctor --backend kubernetes --config FILE`.
func (e *env) kubeDoctor(path string) int {
	ok, err := daemon.KubeDoctorFile(path, e.stdout)
	if err != nil {
		e.errorf("doctor: %v", err)
	}
	return btoi(!ok)
}
