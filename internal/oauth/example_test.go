package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"mcpbox/internal/oauth"
)

// The headless login of `mcpbox login SERVER --no-browser`: the URL is
// the first line of standard output, then Login waits for the redirect.
func ExampleLogin() {
	stateDir := "/path/to/state"
	store := &oauth.FileStore{
		Dir:  filepath.Join(stateDir, "oauth"),
		Keys: oauth.KeyFile(filepath.Join(stateDir, "oauth.key")),
	}
	g, err := oauth.Login(context.Background(), oauth.LoginOptions{
		Server:  "https://mcp.example.com/mcp",
		Store:   store,
		OpenURL: func(u string) error { _, err := fmt.Println(u); return err },
	})
	if err != nil {
		fmt.Println("login:", err)
		return
	}
	fmt.Println("logged in at", g.Issuer)
}

// Serve's side: the upstream HTTP client of a remote server carries the
// stored token; a missing login becomes a clear error.
func ExampleTransport() {
	store := &oauth.FileStore{Dir: "/path/to/state/oauth", Keys: oauth.KeyFile("/path/to/state/oauth.key")}
	hc := &http.Client{Transport: &oauth.Transport{Server: "https://mcp.example.com/mcp", Store: store}}
	resp, err := hc.Get("https://mcp.example.com/mcp")
	var need *oauth.AuthRequiredError
	if errors.As(err, &need) {
		fmt.Println("run: mcpbox login SERVER:", need)
		return
	}
	if err == nil {
		resp.Body.Close()
	}
}
