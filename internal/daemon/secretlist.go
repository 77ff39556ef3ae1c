package daemon

import (
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/redact"
)

// SecretRow is one line of `mcpbox secrets`: where a secret comes from
// and where it goes, never its value. ID is SERVER/NAME.
type SecretRow struct {
	ID     string `json:"id"`
	Server string `json:"server"`
	Name   string `json:"name"`
	From   string `json:"from"`
	As     string `json:"as"`
	TTL    string `json:"ttl,omitempty"`
	// Hosts: the secret is added at the egress proxy for these (inject).
	Hosts []string `json:"inject_hosts,omitempty"`
	// Namespace is where the Secret of a kubernetes: reference is.
	Namespace string `json:"namespace,omitempty"`
}

// Source is From with the namespace of a kubernetes: reference: the
// listing's FROM.
func (r SecretRow) Source() string {
	if r.Namespace == "" {
		return r.From
	}
	return r.From + " (namespace " + r.Namespace + ")"
}

// The AS of a listed secret that is neither env nor file.
const (
	SecretAsHeader = "header" // a remote server's header
	SecretAsQuery  = "query"  // a remote server's URL query parameter
	SecretAsProxy  = "proxy"  // added at the egress proxy (inject)
	// A key written in a remote server's url itself (in its path, or a
	// query value or password not moved to a reference): redacted
	// everywhere by its value, but in the config as plain text.
	SecretAsURL = "url"
	// A remote server's pre-registered OAuth client, and the key that
	// seals every stored login (oauth.store_key).
	SecretAsOAuthClient = "oauth client"
	SecretAsOAuthKey    = "oauth store key"
)

// SecretList lists every server's secrets of c, the remote servers'
// headers and query parameters (references resolved at every connection: secrets by another
// name) and their OAuth logins (LoginSummary; configPath is the
// config's file).
func SecretList(c *config.Config, configPath string) []SecretRow {
	var rows []SecretRow
	for _, s := range c.Servers {
		for _, sec := range s.Secrets {
			r := secretRow(s, sec)
			if _, ok, _ := config.ParseKubeSecretRef(sec.From); ok {
				r.Namespace = c.BackendOf(s).Namespace
			}
			rows = append(rows, r)
		}
		for _, h := range s.Headers {
			rows = append(rows, SecretRow{ID: s.Name + "/" + h.Name, Server: s.Name, Name: h.Name, From: h.From, As: SecretAsHeader})
		}
		for _, q := range s.Query {
			rows = append(rows, SecretRow{ID: s.Name + "/" + q.Name, Server: s.Name, Name: q.Name, From: q.From, As: SecretAsQuery})
		}
		if len(config.URLKeys(s.URL, redact.Shaped)) > 0 {
			// "(url)": no header or query parameter of that name to confuse
			// it with, and nothing a rotate could name.
			rows = append(rows, SecretRow{ID: s.Name + "/(url)", Server: s.Name, Name: "(url)", From: "written in the config", As: SecretAsURL})
		}
		if o := s.OAuth; o != nil {
			for _, t := range []struct {
				name string
				ref  config.Token
			}{{"client_id", o.ClientID}, {"client_secret", o.ClientSecret}} {
				if t.ref.From != "" {
					rows = append(rows, SecretRow{ID: s.Name + "/oauth." + t.name, Server: s.Name, Name: "oauth." + t.name, From: t.ref.From, As: SecretAsOAuthClient})
				}
			}
		}
	}
	if k := c.OAuth.StoreKey.From; k != "" {
		rows = append(rows, SecretRow{ID: "oauth.store_key", Name: "oauth.store_key", From: k, As: SecretAsOAuthKey})
	}
	for _, l := range LoginSummary(c, configPath, "") {
		rows = append(rows, SecretRow{ID: l.Server + "/oauth", Server: l.Server, Name: "oauth", From: "mcpbox login", As: l.State})
	}
	return rows
}

func secretRow(s *config.Server, sec config.Secret) SecretRow {
	as := sec.As
	if as == "" {
		as = config.SecretAsEnv
	}
	r := SecretRow{ID: s.Name + "/" + sec.Name, Server: s.Name, Name: sec.Name, From: sec.From, As: as}
	if sec.TTL != 0 {
		r.TTL = sec.TTL.String()
	}
	if in := sec.Inject; in != nil {
		r.As, r.Hosts = SecretAsProxy, in.Hosts
		if a := in.AWS; a != nil {
			r.From = strings.TrimSuffix(a.AccessKeyID+","+a.SecretAccessKey+","+a.SessionToken, ",")
		}
	}
	return r
}
