package pkginstall

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/sandbox"
)

// realModules holds the real npm packages the end-to-end tests install
// (test/e2e/node: npm ci there).
const realModules = "../../test/e2e/node/node_modules"

// packDir packs a package directory as npm pack would lay it out
// (package/...), leaving out nested node_modules.
func packDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// addModules puts every package of a node_modules dir, nested ones
// included, into the registry; it returns how many versions it added.
func (r *fakeRegistry) addModules(t *testing.T, root string) int {
	t.Helper()
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no real npm packages at %s (run npm ci in test/e2e/node): %v", root, err)
	}
	seen := map[string]bool{}
	var walk func(nm string)
	walk = func(nm string) {
		ents, _ := os.ReadDir(nm)
		for _, e := range ents {
			switch {
			case strings.HasPrefix(e.Name(), "."):
			case strings.HasPrefix(e.Name(), "@"):
				sub, _ := os.ReadDir(filepath.Join(nm, e.Name()))
				for _, s := range sub {
					r.addModule(t, filepath.Join(nm, e.Name(), s.Name()), seen)
					walk(filepath.Join(nm, e.Name(), s.Name(), "node_modules"))
				}
			default:
				r.addModule(t, filepath.Join(nm, e.Name()), seen)
				walk(filepath.Join(nm, e.Name(), "node_modules"))
			}
		}
	}
	walk(root)
	return len(seen)
}

func (r *fakeRegistry) addModule(t *testing.T, dir string, seen map[string]bool) {
	pj, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return
	}
	var m struct{ Name, Version string }
	if json.Unmarshal(pj, &m) != nil || m.Name == "" || seen[m.Name+"@"+m.Version] {
		return
	}
	seen[m.Name+"@"+m.Version] = true
	r.add(t, testPkg{name: m.Name, version: m.Version, files: map[string]string{"package.json": string(pj)}, tarball: packDir(t, dir)})
}

// A real MCP server from its real packages, through the loopback
// registry: installed in the sandboxes, then run in a server sandbox
// without network from the read-only store, answering tools/list.
func TestInstallRealServerMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("packs ~100 real packages")
	}
	requireNPM(t)
	reg := newFakeRegistry(t, "")
	if n := reg.addModules(t, realModules); n < 10 {
		t.Skipf("only %d packages under %s", n, realModules)
	}
	in := &Installer{Store: t.TempDir(), NPM: NPMConfig{Registry: reg.url()}, AllowDegraded: allowDegraded}
	ctx := ctxT(t)
	start := time.Now()
	pkg, err := in.Install(ctx, Source{Ecosystem: NPM, Name: "@modelcontextprotocol/server-memory", Version: "latest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %s in %s, %d registry requests", pkg.Pin, time.Since(start).Round(time.Millisecond), reg.requests.Load())
	if pkg.Bin != "mcp-server-memory" {
		t.Fatalf("bin %q", pkg.Bin)
	}

	const target = "/opt/mcpbox/pkg"
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var stderr tailBuffer
	sb, err := sandbox.Start(ctx, sandbox.Spec{
		Args:          pkg.Command(target, nil),
		Mounts:        []sandbox.Mount{pkg.Mount(target)},
		Env:           []string{"MEMORY_FILE_PATH=/tmp/memory.jsonl"},
		AllowDegraded: allowDegraded,
		Limits:        sandbox.Limits{Timeout: time.Minute},
	}, sandbox.Stdio{Stdin: stdinR, Stdout: stdoutW, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sb.Kill()
		stdinW.Close()
		stdoutW.Close()
		sb.Wait()
	}()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		go stdinW.Write([]byte(msg + "\n"))
		time.Sleep(10 * time.Millisecond) // keep the order of the writes
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdoutR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("server closed stdout; stderr: %s", stderr.summary())
			}
			var resp struct {
				ID     int `json:"id"`
				Result struct {
					Tools []struct{ Name string } `json:"tools"`
				} `json:"result"`
			}
			if json.Unmarshal([]byte(l), &resp) != nil || resp.ID != 2 {
				continue
			}
			var names []string
			for _, tool := range resp.Result.Tools {
				names = append(names, tool.Name)
			}
			if !strings.Contains(strings.Join(names, ","), "create_entities") {
				t.Fatalf("tools/list: %v, want create_entities among them", names)
			}
			return
		case <-timeout:
			t.Fatalf("no tools/list answer in 30s; stderr: %s", stderr.summary())
		}
	}
}
