package gateway

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
)

// TestInstructionsHook: a server's initialize instructions go through the
// List hook as KindInstructions; what the hook withholds never reaches the
// client, so a changed or poisoned text cannot bypass pinning and the
// scanner.
func TestInstructionsHook(t *testing.T) {
	tests := []struct {
		name string
		keep bool
		want string
	}{
		{"withheld", false, ""},
		{"let through", true, "raw server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			launch, _ := rawLauncher(t, nil)
			var mu sync.Mutex
			var seen []Item
			gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{Hooks: Hooks{
				List: func(agent, server, kind string, _ uint64, items []Item) []Item {
					if kind != KindInstructions {
						return items
					}
					mu.Lock()
					seen = append(seen, items...)
					mu.Unlock()
					if tt.keep {
						return items
					}
					return nil
				},
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer gw.Close()
			c := newRawClient(t, gw)
			res, _ := c.init["result"].(map[string]any)
			if got, _ := res["instructions"].(string); got != tt.want {
				t.Errorf("instructions = %q, want %q", got, tt.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0].Key != InstructionsKey {
				t.Fatalf("the hook saw %v, want the one instructions item", seen)
			}
			var def map[string]string
			if err := json.Unmarshal(seen[0].Raw, &def); err != nil || def["instructions"] != "raw server" || def["name"] != InstructionsKey {
				t.Errorf("the hook saw %s (%v)", seen[0].Raw, err)
			}
		})
	}
}

// TestInstructionsItem: the item is the text, exactly, under its key.
func TestInstructionsItem(t *testing.T) {
	text := "use <b>x</b>\n\u202eand \"y\""
	it := InstructionsItem(text)
	var def map[string]string
	if err := json.Unmarshal(it.Raw, &def); err != nil || def["instructions"] != text || it.Key != InstructionsKey {
		t.Errorf("InstructionsItem(%q) = %s (%v)", text, it.Raw, err)
	}
	if keys := slices.Sorted(maps.Keys(def)); !slices.Equal(keys, []string{"instructions", "name"}) {
		t.Errorf("members %v", keys)
	}
}
