package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resourceServer is a go-sdk server that offers uris and accepts
// subscriptions to them.
func resourceServer(name string, uris ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, uri := range uris {
		s.AddResource(&mcp.Resource{URI: uri, Name: "r"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name}}}, nil
		})
	}
	return s
}

// updates collects the resources/updated URIs a client receives.
type updates struct {
	mu   sync.Mutex
	uris []string
	got  chan string
}

func (u *updates) options() *mcp.ClientOptions {
	u.got = make(chan string, 16)
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		u.mu.Lock()
		u.uris = append(u.uris, req.Params.URI)
		u.mu.Unlock()
		u.got <- req.Params.URI
	}}
}

func (u *updates) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.uris...)
}

func (u *updates) wait(t *testing.T, who, uri string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-u.got:
			if got == uri {
				return
			}
		case <-timeout:
			t.Fatalf("%s never received the update of %s (got %v)", who, uri, u.seen())
		}
	}
}

// TestResourceUpdatedRoutedByServer: a shared server's update of a URI
// reaches only the clients that subscribed to that URI on that server,
// not a client subscribed to the same URI on its own private server.
func TestResourceUpdatedRoutedByServer(t *testing.T) {
	const same, marker = "test://same/r", "test://pub/marker"
	pub := resourceServer("pub", same, marker)
	priv := sdkLauncher(func(sc Scope) *mcp.Server {
		if sc.Agent == "bob" {
			return resourceServer("priv-bob", same)
		}
		return resourceServer("priv-" + sc.Agent)
	}, nil, nil)
	gw := newGateway(t,
		// priv first: bob's subscription resolves to his own server.
		&Server{Name: "priv", Prefix: "p_", Scope: ScopeAgent, Launch: priv, Allow: []string{"*"}},
		&Server{Name: "pub", Prefix: "s_", Scope: ScopeShared, Launch: sdkLauncher(func(Scope) *mcp.Server { return pub }, nil, nil), Allow: []string{"*"}},
	)
	url := serveHTTP(t, gw, HTTPOptions{
		Clients: []Client{{Name: "alice", Token: []byte("alice-token-0123456789")}, {Name: "bob", Token: []byte("bob-token-0123456789ab")}},
	})
	var toAlice, toBob updates
	alice := connect(t, url, "alice-token-0123456789", toAlice.options())
	bob := connect(t, url, "bob-token-0123456789ab", toBob.options())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, sub := range []struct {
		cs  *mcp.ClientSession
		uri string
	}{{alice, same}, {bob, same}, {bob, marker}} {
		if err := sub.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: sub.uri}); err != nil {
			t.Fatalf("subscribing to %s: %v", sub.uri, err)
		}
	}
	// The shared server updates the URI, then one that bob subscribed to
	// on it: both pass the same queue to bob, so once the marker is there,
	// a misrouted update would be too.
	pub.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: same})
	pub.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: marker})
	toAlice.wait(t, "alice", same)
	toBob.wait(t, "bob", marker)
	time.Sleep(100 * time.Millisecond) // the client may handle notifications concurrently
	for _, uri := range toBob.seen() {
		if uri == same {
			t.Fatalf("bob received the shared server's update of %s, which he subscribed to on his private server", same)
		}
	}
}
