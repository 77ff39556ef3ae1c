package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The arguments tests send calls through `mcpbox serve` to the test
// server's rawargs tool, which returns its arguments as they arrived.

// argsBox allows every tool and sends rawargs calls that carry a
// "review" argument to a human.
const argsBox = `    secrets: {API_TOKEN: {from: "env:AU_SECRET"}}
    tools:
      rules:
        - {tool: rawargs, when: 'has(args.repoOwner) && args.repoOwner != "org"', action: deny}
        - {tool: rawargs, when: 'has(args.review)', action: approve}
      allow: ["*"]
`

// argsNumbers are integers past float64's 53 bits, which a decode into
// map[string]any and back rounds (12345678901234567000, 9007199254740992),
// and number spellings such a round trip rewrites.
var argsNumbers = []string{`"amount":12345678901234567890`, `"acct":9007199254740993`, `"n":[18446744073709551617,1.10,1e2,-0.0]`}

// callRaw calls tool with raw as its arguments, in the background.
func callRaw(sess *mcp.ClientSession, tool string, raw string) <-chan auCall {
	ch := make(chan auCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(raw)})
		ch <- auCall{res, err, time.Since(start)}
	}()
	return ch
}

// argsHidden is the review's attack on the approver: 30 arguments, a key
// that reads as a line of the prompt, a 2,000-character value and a
// secret before the dangerous last argument. It returns the JSON and the
// keys in order.
func argsHidden(secret string) (string, []string) {
	var b strings.Builder
	var keys []string
	add := func(k, v string) {
		sep := ","
		if keys == nil {
			sep = "{"
		}
		kq, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s%s:%s", sep, kq, v)
		keys = append(keys, k)
	}
	add("review", "true")
	add("\nApprove: yes", `"ok"`)
	add("body", `"`+strings.Repeat("b", 2000)+`"`)
	add("token", `"Bearer `+secret+`"`)
	for _, n := range argsNumbers {
		k, v, _ := strings.Cut(n, ":")
		add(strings.Trim(k, `"`), v)
	}
	for i := len(keys); i < 29; i++ {
		add(fmt.Sprintf("opt%02d", i), strconv.Itoa(i))
	}
	add("zz_delete", `"/home/user/.ssh"`)
	b.WriteString("}")
	return b.String(), keys
}

// TestArgumentsAsSent: numbers past float64's precision reach a real
// server byte for byte through `mcpbox serve`, on a call the policy
// allows and on one a human approves; keys that differ only in case are
// refused; the approver is shown every
// argument, keys quoted, in every channel (elicitation, `mcpbox
// approvals` text and --json, the web socket), with the secret redacted.
func TestArgumentsAsSent(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		secret := "s3cr3t-" + gwHex(16)
		s := auConfig(t, m, "approvals: {timeout: 1m}\n", argsBox)
		g := gwServe(t, m, s.cfg, auTokenEnv+"="+s.token, "AU_SECRET="+secret)

		// Allowed by the policy: the server gets the arguments exactly.
		plain := "{" + strings.Join(argsNumbers, ",") + `,"s":"caf\u00e9"}`
		sess0 := s.connect(t, g, nil)
		wantOK(t, await(t, callRaw(sess0, "rawargs", plain)), plain)

		// A second spelling of a key the policy reads, which a Go server
		// binding keys case-insensitively would act on, is refused.
		wantOK(t, await(t, callRaw(sess0, "rawargs", `{"repoOwner":"org"}`)), `{"repoOwner":"org"}`)
		wantRefused(t, await(t, callRaw(sess0, "rawargs", `{"repoOwner":"org","repoowner":"victim"}`)),
			`"repoOwner" and "repoowner", which differ only in case`)

		// Sent to review: every channel shows every argument.
		asked := make(chan string, 1)
		sess := s.connect(t, g, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- req.Params.Message
				return &mcp.ElicitResult{Action: "cancel"}, nil // no answer: the CLI decides
			},
		})
		hidden, keys := argsHidden(secret)
		call := callRaw(sess, "rawargs", hidden)
		p := s.pendingFor(t, "rawargs")
		id := p.str("id")

		lines := map[string]string{}
		select {
		case lines["elicitation"] = <-asked:
		case <-time.After(30 * time.Second):
			t.Fatal("the client was never asked")
		}
		text := s.cli(t, "approvals", "--config", s.cfg)
		if text.code != 0 {
			t.Fatalf("mcpbox approvals:\n%s", text)
		}
		lines["mcpbox approvals"] = text.stdout
		for name, out := range lines {
			for _, k := range keys {
				if !strings.Contains(out, "\n  "+strconv.Quote(k)+": ") {
					t.Errorf("%s lacks the key %s on a line of its own:\n%s", name, strconv.Quote(k), out)
				}
			}
			if !strings.Contains(out, `"zz_delete": "/home/user/.ssh"`) || !strings.Contains(out, `"acct": 9007199254740993`) {
				t.Errorf("%s lacks the last argument or the exact number:\n%s", name, out)
			}
			if strings.Contains(out, "\nApprove: yes") || strings.Contains(out, secret) {
				t.Errorf("%s shows a key as a prompt line, or the secret:\n%s", name, out)
			}
		}

		js := s.cli(t, "approvals", "--json", "--config", s.cfg)
		if js.code != 0 {
			t.Fatalf("mcpbox approvals --json:\n%s", js)
		}
		var fromCLI json.RawMessage
		for _, l := range strings.Split(strings.TrimSpace(js.stdout), "\n") {
			var line struct {
				ID      string
				Request struct{ Arguments json.RawMessage }
			}
			if json.Unmarshal([]byte(l), &line) == nil && line.ID == id {
				fromCLI = line.Request.Arguments
			}
		}
		checkHeldArgs(t, "mcpbox approvals --json", fromCLI, hidden, secret)

		sock := filepath.Join(s.state, "approvals.sock")
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
		}}
		resp, err := hc.Get("http://mcpbox/approvals")
		if err != nil {
			t.Fatal(err)
		}
		var web struct {
			Pending []struct {
				ID        string
				Arguments json.RawMessage
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&web)
		resp.Body.Close()
		if err != nil || len(web.Pending) != 1 || web.Pending[0].ID != id {
			t.Fatalf("GET /approvals: %+v %v", web, err)
		}
		checkHeldArgs(t, "GET /approvals", web.Pending[0].Arguments, hidden, secret)

		if r := s.cli(t, "approve", id, "--config", s.cfg); r.code != 0 {
			t.Fatalf("mcpbox approve:\n%s", r)
		}
		c := await(t, call)
		if c.err != nil || c.res.IsError {
			t.Fatalf("approved call: %v %v", c.err, c.res)
		}
		for _, n := range argsNumbers {
			if !strings.Contains(gwText(c.res), n) {
				t.Errorf("the server got %.300s…, want %s as sent", gwText(c.res), n)
			}
		}
		g.stop(t)
	})
}

// checkHeldArgs: got are the held request's arguments as a channel gave
// them: every argument of sent, byte for byte, but the token, redacted.
func checkHeldArgs(t *testing.T, channel string, got json.RawMessage, sent, secret string) {
	t.Helper()
	var g, s map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: arguments %s: %v", channel, got, err)
	}
	if err := json.Unmarshal([]byte(sent), &s); err != nil {
		t.Fatal(err)
	}
	if len(g) != len(s) {
		t.Errorf("%s: %d arguments, want %d", channel, len(g), len(s))
	}
	for k, v := range s {
		if k == "token" {
			if bytes.Contains(g[k], []byte(secret)) || !bytes.HasPrefix(g[k], []byte(`"Bearer [REDACTED`)) {
				t.Errorf("%s: token %s, want it redacted", channel, g[k])
			}
			continue
		}
		if !bytes.Equal(g[k], v) {
			t.Errorf("%s: argument %q is %.80s, want %.80s", channel, k, g[k], v)
		}
	}
}
