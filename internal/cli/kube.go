package cli

import "mcpbox/internal/daemon"

const kubeHelp = `USAGE
  mcpbox kube rbac [--config FILE] [--namespace NS] [--subject USER|system:serviceaccount:NS:NAME]

Prints the gateway's Role and RoleBinding (kubernetes backend) as YAML.
With --config, the Role may also get, by name, the Secrets that FILE's
kubernetes:SECRET/KEY references name in NS; without, it reads no Secret.
`

func (e *env) kubeCmd(args []string) int {
	fs := e.newFlagSet("kube", kubeHelp)
	cfgPath := fs.String("config", "", "the config `FILE` whose kubernetes: Secrets the Role may read")
	ns := fs.String("namespace", "", "the namespace `NS` of the servers' pods (default: the config's, else mcp)")
	subject := fs.String("subject", "system:serviceaccount:mcp:mcpbox", "the `SUBJECT` the gateway runs as: USER or system:serviceaccount:NS:NAME (default: system:serviceaccount:mcp:mcpbox)")
	switch {
	case len(args) == 0:
		e.errorf("kube: want a subcommand: rbac")
		return exitUsage
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		args = []string{"rbac", "--help"}
	case args[0] != "rbac":
		e.errorf("kube: unknown command %q (want kube rbac)", args[0])
		return exitUsage
	}
	if code, stop := e.parse(fs, args[1:]); stop {
		return code
	}
	y, err := daemon.KubeRBAC(*cfgPath, *ns, *subject)
	if err != nil {
		e.errorf("kube rbac: %v", err)
		return 1
	}
	e.stdout.Write(y)
	return 0
}

// kubeDoctor is `doctor --backend kubernetes --config FILE`.
func (e *env) kubeDoctor(path string) int {
	ok, err := daemon.KubeDoctorFile(path, e.stdout)
	if err != nil {
		e.errorf("doctor: %v", err)
	}
	if ok {
		return 0
	}
	return 1
}
