package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"mcpbox/internal/config"
)

const secretsHelp = `USAGE
  mcpbox secrets --config FILE [--json]

Lists the secret references of every server in FILE and where each goes
(variable or /run/secrets file): never a value. 'mcpbox secrets rotate'
comes with the gateway, which keeps sandboxes running.
`

// secretRow is one listed secret; ID is SERVER/NAME.
type secretRow struct {
	ID     string `json:"id"`
	Server string `json:"server"`
	Name   string `json:"name"`
	From   string `json:"from"`
	As     string `json:"as"`
	TTL    string `json:"ttl,omitempty"`
}

func (e *env) secrets(args []string) int {
	fs := e.newFlagSet("secrets", secretsHelp)
	cfgPath := fs.String("config", "", "the config `FILE` whose secrets to list")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("secrets %s: not available in this build yet (it comes with the gateway)", fs.Arg(0))
		return exitUsage
	}
	if *cfgPath == "" {
		e.errorf("secrets: --config FILE is required")
		return exitUsage
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return 1
	}
	rows := secretRows(c)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
		return 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tNAME\tFROM\tAS\tTTL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Server, r.Name, r.From, r.As, r.TTL)
	}
	tw.Flush()
	return 0
}

func secretRows(c *config.Config) []secretRow {
	var rows []secretRow
	for _, s := range c.Servers {
		for _, sec := range s.Secrets {
			as := sec.As
			if as == "" {
				as = config.SecretAsEnv
			}
			r := secretRow{ID: s.Name + "/" + sec.Name, Server: s.Name, Name: sec.Name, From: sec.From, As: as}
			if sec.TTL != 0 {
				r.TTL = sec.TTL.String()
			}
			rows = append(rows, r)
		}
	}
	return rows
}
