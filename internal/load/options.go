//go:build linux

package load

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Scenarios and server choices of [Options].
const (
	ScenarioCalls = "calls"
	ScenarioChurn = "churn"

	ServerBuiltin = "builtin"
	ServerNPM     = "npm"
	ServerBoth    = "both"
)

// The servers of the config Run writes, and the tools the driver calls.
// A gateway given by URL must serve the same names (see [WriteConfig]).
const (
	builtinName = "ws"
	npmName     = "npm"
	builtinTool = "read_file"
	npmTool     = "echo"
	// everythingJS is server-everything's entry point inside the sandbox.
	everythingJS = "/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	// inputFiles is how many files the built-in server's input holds;
	// read_file calls cycle through them and check their content.
	inputFiles = 16
)

// Options says what to run. The zero value of each field is documented.
type Options struct {
	// Scenario is ScenarioCalls or ScenarioChurn; "" is calls.
	Scenario string
	// Server is ServerBuiltin, ServerNPM or ServerBoth; "" is builtin.
	// With both, a session's calls alternate between the two.
	Server string
	// Clients is the number of client identities (tokens); 0 is 1.
	Clients int
	// Sessions is the number of MCP sessions, spread round-robin over
	// the clients; 0 is one per client. For churn: sessions opened and
	// closed in all.
	Sessions int
	// Calls is the number of tool calls per session; 0 is 100 (churn: 1).
	Calls int
	// Concurrency: calls: calls in flight per session, 0 is 1; churn:
	// sessions open at once, 0 is 4.
	Concurrency int
	// Rate, for calls, paces the load at this many calls per second in
	// all (an open loop, as latency targets are measured); 0 sends each
	// call as soon as the previous one returns (a closed loop: the
	// gateway's throughput, with latency at saturation).
	Rate float64
	// Scope is the servers' scope (agent, session, shared); "" is agent
	// for calls and session for churn (so that every churned session
	// starts and stops sandboxes).
	Scope string
	// IdleCalls is how many sequential calls of one session measure the
	// idle latency before the load; 0 is 200, -1 skips it.
	IdleCalls int
	// Settle is how long churn waits, after its sandboxes are gone, before
	// the second measurement; 0 is 5 s.
	Settle time.Duration
	// SampleEvery is the interval of the resource samples; 0 is 1 s.
	SampleEvery time.Duration

	// Mcpbox is the mcpbox binary that serves the gateway and answers
	// logs; "" looks up "mcpbox" in PATH.
	Mcpbox string
	// NodeModules holds @modelcontextprotocol/server-everything; required
	// for the npm server when Run starts the gateway.
	NodeModules string
	// ServeFlags are extra flags for `mcpbox serve`.
	ServeFlags []string
	// Keep keeps the temp dir (config, state dir, audit) after the run.
	Keep bool

	// URL, Tokens and StateDir select an existing gateway instead of
	// starting one: its endpoint, one token per client (none: the gateway
	// has no clients), and its state dir (for the admin socket and the
	// audit). It must serve the servers WriteConfig writes. PID, if not
	// 0, is sampled from /proc.
	URL      string
	Tokens   []string
	StateDir string
	PID      int

	// Progress, if non-nil, gets a line per phase and sample.
	Progress func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Scenario == "" {
		o.Scenario = ScenarioCalls
	}
	if o.Server == "" {
		o.Server = ServerBuiltin
	}
	o.Clients = max(o.Clients, 1)
	if o.Sessions <= 0 {
		o.Sessions = o.Clients
	}
	if o.Calls <= 0 {
		o.Calls = 100
		if o.Scenario == ScenarioChurn {
			o.Calls = 1
		}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
		if o.Scenario == ScenarioChurn {
			o.Concurrency = 4
		}
	}
	if o.Scope == "" {
		o.Scope = "agent"
		if o.Scenario == ScenarioChurn {
			o.Scope = "session"
		}
	}
	if o.IdleCalls == 0 {
		o.IdleCalls = 200
	}
	if o.Settle == 0 {
		o.Settle = 5 * time.Second
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = time.Second
	}
	if o.Mcpbox == "" {
		o.Mcpbox = "mcpbox"
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Scenario != ScenarioCalls && o.Scenario != ScenarioChurn:
		return fmt.Errorf("scenario %q: want %s or %s", o.Scenario, ScenarioCalls, ScenarioChurn)
	case o.Server != ServerBuiltin && o.Server != ServerNPM && o.Server != ServerBoth:
		return fmt.Errorf("server %q: want %s, %s or %s", o.Server, ServerBuiltin, ServerNPM, ServerBoth)
	case o.Scope != "agent" && o.Scope != "session" && o.Scope != "shared":
		return fmt.Errorf("scope %q: want agent, session or shared", o.Scope)
	case o.URL == "" && o.Server != ServerBuiltin && o.NodeModules == "":
		return fmt.Errorf("the npm server needs the node_modules dir holding @modelcontextprotocol/server-everything")
	case o.URL != "" && len(o.Tokens) > 0 && len(o.Tokens) < o.Clients:
		return fmt.Errorf("%d tokens for %d clients", len(o.Tokens), o.Clients)
	case o.URL != "" && o.StateDir == "":
		return fmt.Errorf("a gateway given by URL needs its state dir (for the audit and the admin socket)")
	}
	return nil
}

// targets are the (server, tool) pairs a session calls, in turn.
func (o Options) targets() []target {
	var ts []target
	if o.Server != ServerNPM {
		ts = append(ts, target{server: builtinName, tool: builtinTool})
	}
	if o.Server != ServerBuiltin {
		ts = append(ts, target{server: npmName, tool: npmTool})
	}
	return ts
}

// target is one server's tool as the driver calls it.
type target struct{ server, tool string }

// name is the tool's name behind the gateway: the config gives every
// server the prefix NAME__, the default when there are two.
func (t target) name() string { return t.server + "__" + t.tool }

// instance is what WriteConfig made: the config and what to run it with.
type instance struct {
	dir, config, stateDir string
	tokens                []string
	env                   []string // MCPBOX_LOAD_TOKEN_i=token
}

// WriteConfig writes a serve config into dir (which must exist): the
// built-in workspace server "ws" (input: files written beside it) and, if
// nodeModules is not "", server-everything as "npm", both with scope,
// every tool allowed without review, and clients c000... whose tokens come
// from MCPBOX_LOAD_TOKEN_0... It returns the config's path and the
// environment serve needs.
func WriteConfig(dir string, clients int, scope, nodeModules string) (cfg string, env []string, err error) {
	in, err := writeConfig(dir, clients, scope, nodeModules)
	if err != nil {
		return "", nil, err
	}
	return in.config, in.env, nil
}

func writeConfig(dir string, clients int, scope, nodeModules string) (*instance, error) {
	in := &instance{dir: dir, config: filepath.Join(dir, "mcpbox.yaml"), stateDir: filepath.Join(dir, "state")}
	input := filepath.Join(dir, "input")
	if err := os.MkdirAll(input, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", input, err)
	}
	for i := range inputFiles {
		p := filepath.Join(input, fmt.Sprintf("f%02d.txt", i))
		if err := os.WriteFile(p, []byte(fileContent(i)), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
	}
	servers := map[string]any{
		builtinName: map[string]any{
			"builtin":    "workspace",
			"prefix":     builtinName + "__",
			"scope":      scope,
			"filesystem": map[string]any{"input": map[string]string{"source": input}},
			"tools":      map[string]any{"allow": []string{"*"}},
		},
	}
	if nodeModules != "" {
		// The mount source must be a plain path: serve walks host paths
		// without following symlinks.
		nm, err := filepath.EvalSymlinks(nodeModules)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", nodeModules, err)
		}
		servers[npmName] = map[string]any{
			"command": []string{"node", everythingJS},
			"prefix":  npmName + "__",
			"scope":   scope,
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": nm, "target": "/opt/mcp/node_modules", "mode": "ro"}},
			},
			"tools": map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}},
		}
	}
	var cl []map[string]any
	for i := range clients {
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return nil, err
		}
		in.tokens = append(in.tokens, hex.EncodeToString(tok))
		env := fmt.Sprintf("MCPBOX_LOAD_TOKEN_%d", i)
		in.env = append(in.env, env+"="+in.tokens[i])
		cl = append(cl, map[string]any{"name": clientName(i), "token": map[string]string{"from": "env:" + env}})
	}
	cfg := map[string]any{"version": 1, "state_dir": in.stateDir, "clients": cl, "servers": servers}
	b, err := json.MarshalIndent(cfg, "", "  ") // JSON is YAML
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(in.config, b, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", in.config, err)
	}
	return in, nil
}

func clientName(i int) string { return fmt.Sprintf("c%03d", i) }

// fileContent is what input file i holds; a read_file reply must be it.
func fileContent(i int) string { return fmt.Sprintf("load test file %02d\n", i) }
