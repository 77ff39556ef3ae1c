package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"mcpbox/internal/sandbox"
)

const doctorHelp = `USAGE
  mcpbox doctor [--json]
  mcpbox doctor --backend kubernetes --config FILE

Reports which isolation features this host supports for the current user
(root or not), what each missing one degrades, and then starts a real
sandbox running /bin/true as the proof that all layers apply together.
Exits 0 when the default policy runs at full strength, 1 otherwise.
With --backend kubernetes it checks the cluster of FILE's backend instead:
API access, the Role of 'mcpbox kube rbac', NetworkPolicy, runtime class,
each kubernetes: Secret FILE names, and where the pods get the agent.
`

func (e *env) doctor(args []string) int {
	fs := e.newFlagSet("doctor", doctorHelp)
	asJSON := fs.Bool("json", false, "print one JSON object per check")
	backend := fs.String("backend", "local", "the `BACKEND` to check: local or kubernetes")
	cfg := fs.String("config", "mcpbox.yaml", "the config `FILE` whose backend to check (kubernetes)")
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	switch *backend {
	case "kubernetes":
		return e.kubeDoctor(*cfg)
	case "local":
	default:
		e.errorf("doctor: --backend %q: want local or kubernetes", *backend)
		return exitUsage
	}
	if fs.NArg() > 0 {
		e.errorf("doctor: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	checks := sandbox.Doctor()
	checks = append(checks, sandbox.LiveCheck())
	ok := true
	for _, c := range checks {
		if c.Required && !c.OK {
			ok = false
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, c := range checks {
			_ = enc.Encode(c)
		}
	} else {
		printChecks(e.stdout, checks, ok)
	}
	if !ok {
		return 1
	}
	return 0
}

func printChecks(w io.Writer, checks []sandbox.Check, ok bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tSTATUS\tDETAIL")
	for _, c := range checks {
		status := "ok"
		if !c.OK {
			status = "MISSING"
			if !c.Required {
				status = "missing"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, status, c.Detail)
	}
	tw.Flush()
	for _, c := range checks {
		if !c.OK {
			fmt.Fprintf(w, "\n%s missing: %s", c.Name, c.Degrades)
			if c.Layer != "" && c.Layer != sandbox.LayerUserns {
				fmt.Fprintf(w, " (accept with --allow-degraded=%s)", c.Layer)
			}
		}
	}
	if ok {
		fmt.Fprintln(w, "\nThe default policy runs at full strength on this host.")
	} else {
		fmt.Fprintln(w, "\nThe default policy cannot run at full strength on this host.")
	}
}
