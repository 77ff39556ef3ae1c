package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"

	"mcpbox/internal/admin"
	"mcpbox/internal/instance"
)

// instanceJSON is an instance as `ps --instances --json` prints it.
type instanceJSON struct {
	ID string `json:"id"`
	instance.Record
	Sandboxes int    `json:"sandboxes"`
	Error     string `json:"error,omitempty"`
}

func (e *env) printInstances(views []admin.View, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, v := range views {
			j := instanceJSON{ID: strconv.Itoa(v.Record.PID), Record: v.Record, Sandboxes: len(v.Sandboxes)}
			if v.Err != nil {
				j.Error = v.Err.Error()
			}
			_ = enc.Encode(j)
		}
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPROJECT\tCONFIG\tTRANSPORT\tURL\tSTARTED\tSANDBOXES\tSTATE DIR")
	for _, v := range views {
		r := v.Record
		n := strconv.Itoa(len(v.Sandboxes))
		if v.Err != nil {
			n = "? (" + oneLine(v.Err.Error(), 40) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.PID, r.Project, cmpOr(r.Config, "(default)"),
			r.Transport, cmpOr(r.URL, "-"), r.Started.Local().Format("15:04:05"), n, r.StateDir)
	}
	tw.Flush()
	for _, v := range views {
		for _, name := range slices.Sorted(maps.Keys(v.Record.Unavailable)) {
			fmt.Fprintf(e.stdout, "instance %d: server %s is unavailable: %s\n", v.Record.PID, name, v.Record.Unavailable[name])
		}
	}
}
