package admin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestUIOp: the ui op answers "still starting" before the gateway is
// attached, an error without SetUI, then what SetUI's function returns
// (its URL or its error); after Detach it starts nothing.
func TestUIOp(t *testing.T) {
	state := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(state, "xdg"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, err := Start(ctx, NewRecord(state, "", state, true, ""), InstanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	c := Client{StateDir: state}
	if _, err := c.UI(); err == nil || !strings.Contains(err.Error(), "still starting") {
		t.Errorf("ui before attach: %v", err)
	}
	inst.Attach(countingBackend{})
	if _, err := c.UI(); err == nil || !strings.Contains(err.Error(), "no dashboard listener") {
		t.Errorf("ui without SetUI: %v", err)
	}
	var calls atomic.Int32
	inst.SetUI(func() (string, error) { calls.Add(1); return "http://127.0.0.1:4321", nil })
	if u, err := c.UI(); err != nil || u != "http://127.0.0.1:4321" {
		t.Errorf("ui: %q, %v", u, err)
	}
	inst.SetUI(func() (string, error) { return "", errors.New("listening: no port") })
	if _, err := c.UI(); err == nil || !strings.Contains(err.Error(), "no port") {
		t.Errorf("ui failing: %v", err)
	}
	inst.SetUI(func() (string, error) { calls.Add(1); return "http://127.0.0.1:4321", nil })
	inst.Detach()
	if _, err := c.UI(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("ui after detach: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the listener was started %d times, want once (before detach)", n)
	}
}
