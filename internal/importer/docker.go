package importer

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"mcpbox/internal/config"
)

// A `docker run` (or `podman run`) entry becomes an image server: mcpbox
// pulls and runs the image itself, without the daemon, whose socket is
// root on the host. Flags that only shape the container (-i, --rm, -t,
// --init, --name, --pull) are dropped; -e VAR becomes a secret read from
// the host's environment (or the entry's env), -e VAR=VALUE an env
// variable (a secret when it holds a credential), -v SRC:DST[:ro] a
// mount, --platform image_platform. Flags that would give the container
// more than a sandbox gives (--privileged, --cap-add, --device, --pid
// host, ...) are dropped with a note; flags mcpbox cannot honour
// (--entrypoint, -d, --env-file, an unknown flag) skip the entry.

// dockerValueFlags are the docker run flags that take a value.
var dockerValueFlags = map[string]bool{
	"-e": true, "--env": true, "--env-file": true, "-v": true, "--volume": true, "--mount": true,
	"--network": true, "--net": true, "-p": true, "--publish": true, "--name": true, "-u": true,
	"--user": true, "-w": true, "--workdir": true, "--entrypoint": true, "--platform": true,
	"-m": true, "--memory": true, "--cpus": true, "--pull": true, "-l": true, "--label": true,
	"-h": true, "--hostname": true, "--add-host": true, "--cap-add": true, "--cap-drop": true,
	"--device": true, "--security-opt": true, "--ulimit": true, "--shm-size": true, "--tmpfs": true,
	"--log-driver": true, "--log-opt": true, "--restart": true, "--dns": true, "--ipc": true,
	"--pid": true, "--gpus": true, "--runtime": true, "--stop-signal": true, "--stop-timeout": true,
	"--group-add": true, "--userns": true, "--uts": true, "--cgroupns": true, "--expose": true,
}

// Flags dropped silently: they shape a container that mcpbox does not make.
var dockerDropped = []string{"-i", "--interactive", "--rm", "-t", "--tty", "--init", "--name", "--pull", "-l", "--label", "--log-driver", "--log-opt", "--restart", "--stop-signal", "--stop-timeout", "--expose", "--read-only"}

// Flags dropped with a note: the sandbox decides these.
var dockerNoted = map[string]string{
	"--privileged": "the sandbox never grants privileges", "--cap-add": "the sandbox drops every capability",
	"--cap-drop": "the sandbox drops every capability", "--device": "the sandbox has no host devices",
	"--security-opt": "the sandbox has its own seccomp and Landlock", "--pid": "the sandbox has its own process namespace",
	"--ipc": "the sandbox has its own IPC namespace", "--uts": "the sandbox has its own hostname",
	"--userns": "the sandbox has its own user namespace", "--cgroupns": "the sandbox has its own cgroup",
	"-u": "the server runs as the sandbox's user", "--user": "the server runs as the sandbox's user",
	"--group-add": "the server runs as the sandbox's user",
	"-w":          "the image's WorkingDir applies", "--workdir": "the image's WorkingDir applies",
	"-p": "a stdio server needs no published port", "--publish": "a stdio server needs no published port",
	"-h": "the sandbox has its own hostname", "--hostname": "the sandbox has its own hostname",
	"--add-host": "the sandbox's /etc/hosts is its own", "--dns": "the egress proxy resolves names",
	"-m": "set limits.memory", "--memory": "set limits.memory", "--cpus": "set limits.cpu",
	"--ulimit": "the sandbox sets its own limits", "--shm-size": "the sandbox's /dev/shm is its own",
	"--tmpfs": "the sandbox's /tmp is a tmpfs", "--gpus": "the sandbox has no GPUs", "--runtime": "mcpbox is the runtime",
}

// Flags that skip the entry: mcpbox cannot do what they ask.
var dockerRefused = map[string]string{
	"-d": "runs the container detached, so it is no stdio server", "--detach": "runs the container detached, so it is no stdio server",
	"--entrypoint": "replaces the image's Entrypoint, which mcpbox does not do (args replace the Cmd only)",
	"--env-file":   "reads variables from a file: list them with -e VAR instead",
}

// dockerRun reports whether ent runs `docker run` or `podman run` and,
// if so, converts it into an image server.
func (im *converter) dockerRun(name, orig string, ent *mcpEntry) (*config.Server, []string, bool, error) {
	base := strings.ToLower(filepath.Base(strings.ReplaceAll(ent.Command, `\`, "/")))
	base = strings.TrimSuffix(base, ".exe")
	args := ent.Args
	if len(args) > 1 && args[0] == "container" {
		args = args[1:]
	}
	if base != "docker" && base != "podman" || len(args) == 0 || args[0] != "run" {
		return nil, nil, false, nil
	}
	s := &config.Server{Name: name, Filesystem: config.Filesystem{Output: &config.Output{}}, Tools: config.Tools{Allow: []string{"*"}}}
	d := dockerConv{im: im, s: s, orig: orig, entEnv: map[string]string{}}
	var envOrder []string
	env, err := members(ent.Env)
	if err != nil {
		return nil, nil, true, fmt.Errorf("env: %w", err)
	}
	for _, m := range env {
		var v string
		if err := json.Unmarshal(m.val, &v); err != nil {
			return nil, nil, true, fmt.Errorf("env.%s: want a string", m.key)
		}
		d.entEnv[m.key] = v
		envOrder = append(envOrder, m.key)
	}
	rest, err := d.flags(args[1:])
	if err != nil {
		return nil, nil, true, fmt.Errorf("%s run: %w", base, err)
	}
	if len(rest) == 0 {
		return nil, nil, true, fmt.Errorf("%s run: no image named", base)
	}
	s.Image.Ref = rest[0]
	if config.LoopbackRegistry(s.Image.Ref) {
		// As docker does: a registry on loopback speaks plain HTTP.
		s.Image.Insecure = true
	}
	if len(rest) > 1 {
		s.Args = im.scrubArgs(orig, rest[1:])
	}
	// Variables of the entry that no -e passes stay out of the container,
	// as with docker; say so, since they look meant for the server.
	for _, k := range envOrder {
		if !d.passed[k] {
			im.notef("server %q: env %s is not passed to the container (no -e %s), so it is left out", orig, k, k)
		}
	}
	hints := append([]string{fmt.Sprintf("was: %s run ... %s (mcpbox pulls and runs the image itself; no %s daemon)", base, s.Image.Ref, base)}, d.hints...)
	return s, hints, true, nil
}

// dockerConv is one docker run entry being converted.
type dockerConv struct {
	im     *converter
	s      *config.Server
	orig   string
	entEnv map[string]string // the entry's env
	passed map[string]bool   // variables -e passed
	hints  []string
}

// flags applies the docker flags before the image and returns the image
// and its arguments.
func (d *dockerConv) flags(args []string) ([]string, error) {
	d.passed = map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args[i+1:], nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return args[i:], nil
		}
		flag, val, hasVal := strings.Cut(a, "=")
		if !hasVal && dockerValueFlags[flag] {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a value", flag)
			}
			i++
			val = args[i]
		}
		if !hasVal && !dockerValueFlags[flag] && !strings.HasPrefix(flag, "--") && len(flag) > 2 {
			// Combined short flags: -it, -ti, -di.
			for _, c := range flag[1:] {
				if err := d.flag("-"+string(c), ""); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := d.flag(flag, val); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (d *dockerConv) flag(flag, val string) error {
	if why, ok := dockerRefused[flag]; ok {
		return fmt.Errorf("%s %s", flag, why)
	}
	switch flag {
	case "-e", "--env":
		return d.env(val)
	case "-v", "--volume":
		d.volume(val, flag)
		return nil
	case "--mount":
		d.mount(val)
		return nil
	case "--platform":
		d.s.Image.Platform = val
		return nil
	case "--network", "--net":
		if val != "none" {
			d.hints = append(d.hints, fmt.Sprintf("%s %s: the sandbox has no network; add network.egress for the hosts the server needs", flag, val))
		}
		return nil
	}
	if why, ok := dockerNoted[flag]; ok {
		d.im.notef("server %q: docker flag %s is dropped: %s", d.orig, flag, why)
		return nil
	}
	if slices.Contains(dockerDropped, flag) || dockerValueFlags[flag] {
		return nil
	}
	return fmt.Errorf("flag %s is not understood by mcpbox import", flag)
}

// env handles -e VAR (the host's or the entry's value) and -e VAR=VALUE.
func (d *dockerConv) env(val string) error {
	k, v, hasVal := strings.Cut(val, "=")
	if !secretNameRE().MatchString(k) {
		return fmt.Errorf("-e %s: not a variable name", k)
	}
	d.passed[k] = true
	if hasVal {
		d.im.envVar(d.s, d.orig, k, v)
		return nil
	}
	if v, ok := d.entEnv[k]; ok {
		d.im.envVar(d.s, d.orig, k, v)
		return nil
	}
	// docker passes the variable of the environment it runs in.
	d.im.need(k, "servers."+d.s.Name+".secrets."+k)
	d.s.Secrets = append(d.s.Secrets, config.Secret{Name: k, From: "env:" + k})
	return nil
}

// volume handles -v SRC:DST[:OPTS].
func (d *dockerConv) volume(val, flag string) {
	parts := strings.Split(val, ":")
	if len(parts) < 2 || len(parts) > 3 {
		d.hints = append(d.hints, fmt.Sprintf("%s %s left out: want SRC:DST[:ro]", flag, val))
		return
	}
	ro := len(parts) == 3 && slices.Contains(strings.Split(parts[2], ","), "ro")
	d.addMount(parts[0], parts[1], ro, flag+" "+val)
}

// mount handles --mount type=bind,source=S,target=T[,readonly].
func (d *dockerConv) mount(val string) {
	var typ, src, dst string
	ro := false
	for _, kv := range strings.Split(val, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "type":
			typ = v
		case "source", "src":
			src = v
		case "target", "destination", "dst":
			dst = v
		case "readonly", "ro":
			ro = v == "" || v == "true" || v == "1"
		}
	}
	if typ != "" && typ != "bind" {
		d.hints = append(d.hints, fmt.Sprintf("--mount %s left out: only bind mounts are imported", val))
		return
	}
	d.addMount(src, dst, ro, "--mount "+val)
}

// addMount adds a bind mount unless its source is protected.
func (d *dockerConv) addMount(src, dst string, ro bool, was string) {
	if why := protectedSource(src, d.im.homes...); why != "" {
		d.hints = append(d.hints, fmt.Sprintf("%s left out: %s", was, why))
		d.im.notef("server %q: mount %s left out: %s", d.orig, src, why)
		return
	}
	if err := config.CheckMountTarget(dst); err != nil {
		d.hints = append(d.hints, fmt.Sprintf("%s left out: its target %v", was, err))
		return
	}
	mode := config.ModeRW
	if ro {
		mode = config.ModeRO
	}
	d.s.Filesystem.Mounts = append(d.s.Filesystem.Mounts, config.Mount{Source: src, Target: dst, Mode: mode})
}

// protectedSource says why src must not be mounted into a server's
// sandbox, or "".
func protectedSource(src string, homes ...string) string {
	if src == "" {
		return "no source"
	}
	if strings.HasPrefix(src, ".") {
		// The client resolved it against its working directory, serve
		// would against the config's (../../.ssh from a repo in ~/src/x).
		return "a relative path: docker resolved it against the client's working directory, mcpbox would against the config's; write the directory meant as an absolute path"
	}
	if !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, "~") && !strings.HasPrefix(src, "$") {
		return "a named docker volume, which only the docker daemon has"
	}
	abs := path.Clean(strings.ReplaceAll(strings.ReplaceAll(src, "${HOME}", "~"), "$HOME", "~"))
	if strings.HasPrefix(src, "~") || strings.HasPrefix(src, "$") {
		if abs != "~" && !strings.HasPrefix(abs, "~/") {
			return src + " climbs out of the home directory"
		}
	}
	// A home of macOS is case-insensitive: ~/.SSH is ~/.ssh there.
	clean := strings.ToLower(homeRelative(abs, homes...))
	base := path.Base(clean)
	if strings.HasSuffix(base, ".sock") && (strings.Contains(base, "docker") || strings.Contains(base, "podman") || strings.Contains(base, "containerd")) ||
		strings.Contains(clean, "/docker.sock") || strings.HasSuffix(clean, "/podman/podman.sock") {
		return "the container daemon's socket is root on the host: never mount it"
	}
	for _, c := range []string{clean, abs} {
		// (protectedHostDirs and protectedHostTrees are lower case.)
		for _, p := range protectedHostDirs {
			if c == p {
				return c + " holds the host's system, credentials or other users' files"
			}
		}
		for _, p := range protectedHostTrees {
			if c == p || strings.HasPrefix(c, p+"/") {
				return c + " holds credentials or the host's kernel interfaces"
			}
			if strings.HasPrefix(p, c+"/") {
				return c + " holds " + p + ", credentials or the host's kernel interfaces"
			}
		}
	}
	if strings.HasPrefix(clean, "~/.") {
		// ~/.netrc, ~/.git-credentials, ~/.password-store, a browser's
		// profile, ~/.local/share/keyrings: a list would miss one.
		return clean + " is a hidden file or directory of the home directory, where programs keep settings, tokens and keys"
	}
	return ""
}

// homeRelative writes a path in a home directory as ~/...: a client's
// config names home directories absolutely (JSON has no ~): the user's
// own, homes (the caller's $HOME, its links resolved: the package reads
// nothing of the host), and any under the places Linux (/home/NAME;
// /var/home/NAME on Fedora's image-based systems) and macOS (/Users/NAME)
// put them; root's, /root, is protected whole.
func homeRelative(p string, homes ...string) string {
	for _, home := range homes {
		if home = path.Clean(home); !path.IsAbs(home) || home == "/" {
			continue
		}
		if p == home {
			return "~"
		}
		if rest, ok := strings.CutPrefix(p, home+"/"); ok {
			return "~/" + rest
		}
	}
	for _, root := range []string{"/home/", "/Users/", "/var/home/"} {
		rest, ok := strings.CutPrefix(p, root)
		if !ok || rest == "" {
			continue
		}
		if _, sub, found := strings.Cut(rest, "/"); found {
			return "~/" + sub
		}
		return "~"
	}
	return p
}

// protectedHostDirs may not be mounted whole; protectedHostTrees not even
// in part.
var (
	protectedHostDirs  = []string{"/", "/etc", "/usr", "/var", "/run", "/var/run", "/home", "/Users", "/var/home", "/root", "/boot", "~", "/tmp"}
	protectedHostTrees = []string{"/proc", "/sys", "/dev", "/root", "/etc/shadow", "/var/lib/docker", "/run/containerd", "/var/run/docker", "/run/docker",
		"/run/user", "/var/run/user", "/run/dbus", "/var/run/dbus", "/run/systemd", "/var/run/systemd", "/var/run/containerd", // the buses' sockets, the service dirs that run code
		"~/.ssh", "~/.docker", "~/.aws", "~/.kube", "~/.gnupg", "~/.config/gcloud", "~/.azure"}
)
