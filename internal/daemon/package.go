package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/guard"
	"mcpbox/internal/integrity"
	"mcpbox/internal/pkginstall"
	"mcpbox/internal/specconv"
)

// stagingAge is how old an install's staging dir must be before a start
// removes it as a crash's leftover: above an install sandbox's timeout.
const stagingAge = 30 * time.Minute

// installsAtOnce is how many package servers' packages install at once.
const installsAtOnce = 4

// lockedWriter serialises the progress lines of concurrent installs.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// PackageServer is a config server that runs a registry package: one with
// `package:`, or whose command is a runner that pkginstall.FromCommand
// recognises (npx -y PKG, uvx PKG, pnpm dlx, pipx run, ...). The
// decision is made here, before any sandbox starts, so no sandbox ever
// runs npx or uvx; the config keeps the command as the user wrote it.
type PackageServer struct {
	Server *config.Server
	Source pkginstall.Source
	Args   []string
}

// PackageServers finds the package servers of c. A package value or a
// runner command that cannot be installed as a pinned package (npx -c,
// uvx --with, a git URL, ...) is a *ConfigError at its position.
func PackageServers(c *config.Config) ([]PackageServer, error) {
	var out []PackageServer
	var errs config.Errors
	for _, s := range c.Servers {
		if c.IsKubernetes(s) && s.Package == "" {
			continue // its command runs in its pod's image as written
		}
		var ps PackageServer
		var ok bool
		var err error
		key := "package"
		if s.Package != "" {
			ps.Source, err = pkginstall.ParseSource(s.Package)
			ps.Args, ok = s.Args, err == nil
		} else if s.Command != nil {
			key = "command"
			ps.Source, ps.Args, ok, err = pkginstall.FromCommand(s.Command)
		}
		if err != nil {
			at := s.Meta.At(key)
			errs = append(errs, &config.Error{File: c.File, Line: at.Line, Col: at.Col,
				Msg: fmt.Sprintf("servers.%s.%s: %v", s.Name, key, err)})
			continue
		}
		if ok {
			ps.Server = s
			out = append(out, ps)
		}
	}
	if len(errs) > 0 {
		return nil, configError(errs)
	}
	return out, nil
}

// packageOptions are what installing a config's packages needs.
type packageOptions struct {
	c        *config.Config
	base     string // the project dir: its .npmrc counts
	stateDir string
	lockPath string
	// progress gets one line per install step (the first start); nil:
	// none.
	progress io.Writer
	log      *slog.Logger
	// verify asks the registry whether each existing pin still holds,
	// even when the store has the package (mcpbox pin).
	verify bool
	// repin re-resolves these servers' packages, ignoring their pins
	// (mcpbox update).
	repin map[string]bool
	// keepGoing leaves a server whose package cannot be installed out
	// (installPackages' failed) instead of failing the whole install.
	keepGoing bool
	// trustHint says how to trust new bytes; "": mcpbox update SERVER
	// (with --config configPath when set).
	trustHint  string
	configPath string
	// egress, if non-nil, gets each connection of server's install
	// sandboxes (for the audit log).
	egress func(server string, ev egress.Event)
}

// PackageChange is a package pin that an install wrote or would write.
type PackageChange struct {
	Server   string
	Old, New integrity.PackagePin // Old zero: first pin
	pkg      *pkginstall.Package  // the installed package of New
}

// installer is the pkginstall.Installer of a state dir, with the user's
// registry configuration.
func (po packageOptions) installer(s *config.Server) (*pkginstall.Installer, error) {
	npm, err := pkginstall.LoadNPMConfig(os.Getenv, po.base)
	if err != nil {
		return nil, fmt.Errorf("server %s: reading the npm configuration: %w", s.Name, err)
	}
	pypi, err := pkginstall.LoadPyPIConfig(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("server %s: reading the pip configuration: %w", s.Name, err)
	}
	in := &pkginstall.Installer{Store: filepath.Join(po.stateDir, "packages"), NPM: npm, PyPI: pypi,
		AllowDegraded: specconv.AllowedDegraded(po.c, s)}
	if po.progress != nil {
		in.Progress = func(line string) { printLine(po.progress, "mcpbox: server %s: %s\n", s.Name, line) }
	}
	if po.egress != nil {
		in.EgressLog = func(ev egress.Event) { po.egress(s.Name, ev) }
	}
	return in, nil
}

// installPackages installs the package servers of po.c into the state
// dir's store and pins what they resolved to in the lock file; it
// returns how to run each (specconv.Options.Packages) and the pins it
// wrote. A pinned package is installed exactly as pinned, without network
// when the store has it; a registry that now serves other bytes for it is
// refused with an error naming the server. With po.keepGoing, a server
// whose package cannot be installed is left out of the result and its
// error is in failed (by server name); else the first such error ends it.
func installPackages(ctx context.Context, po packageOptions) (pkgs map[string]specconv.Package, changes []PackageChange, failed map[string]error, err error) {
	ins, err := po.startInstalls(ctx)
	for _, in := range ins {
		<-in.done
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return po.results(ins)
}

// install is one package server's install, begun by startInstalls.
type install struct {
	ps PackageServer
	// done is closed when it has ended, with pkg, change and err set.
	done   chan struct{}
	pkg    specconv.Package
	change *PackageChange // the pin to write; nil: pinned already
	err    error
	// checked is closed once the package was found and checked, before
	// the long part of its install (pkginstall.Installer.Checked); an
	// install from the store ends without it.
	checked   chan struct{}
	checkOnce sync.Once
}

// check closes checked.
func (in *install) check() { in.checkOnce.Do(func() { close(in.checked) }) }

// awaitInstalls waits until every install has ended, or installWait has
// passed and a server can run: one with no package, or whose package
// installed. While none can, it waits instead until every install has
// ended or been checked (pkginstall.Installer.Checked), up to aloneWait:
// a package that cannot install for a mistake in its name, version or
// bin fails within seconds, and when no server can be set up, serve fails
// at its start, saying why. Then serve serves with the packages still
// installing (at aloneWait, d.serveBy, the wiring's wait ends too); a
// session waits for them a while (the gateway's sessionStartWait).
func (d *daemon) awaitInstalls(ins []*install) {
	d.serveBy = time.Now().Add(aloneWait)
	canRun := len(d.c.Servers) - len(ins)
	w := newInstallWatch(ins)
	late := false
	followInstalls(ins, d.serveBy, func(in *install, checked bool) bool {
		w.see(in, checked)
		if in == nil { // installWait has passed
			late = true
			if canRun+w.installed == 0 && w.unchecked > 0 && d.o.Stderr != nil {
				// A client's initialize waits meanwhile: say why.
				fmt.Fprintf(d.o.Stderr, "mcpbox: waiting up to %s for the registry to confirm a package before serving: no other server can run yet (mcpbox pin%s installs them ahead)\n",
					aloneWait-installWait, loginFlags(d.o.ConfigPath, d.o.StateDir, ""))
			}
		}
		if canRun+w.installed == 0 {
			return w.unchecked > 0
		}
		return !late
	})
}

// installWatch follows installs for followInstalls' callers.
type installWatch struct {
	installed int        // ended without error
	failed    []*install // ended with one
	unchecked int        // neither ended nor checked
	seen      map[*install]bool
}

func newInstallWatch(ins []*install) *installWatch {
	return &installWatch{unchecked: len(ins), seen: map[*install]bool{}}
}

// see takes one of followInstalls' events.
func (w *installWatch) see(in *install, checked bool) {
	if in == nil {
		return
	}
	if !w.seen[in] {
		w.seen[in] = true
		w.unchecked--
	}
	switch {
	case checked:
	case in.err == nil:
		w.installed++
	default:
		w.failed = append(w.failed, in)
	}
}

// followInstalls calls more with each install of ins once it is checked
// (checked true) and once it has ended, and with nil once installWait
// has passed, until every one has ended, more returns false, or by has
// come.
func followInstalls(ins []*install, by time.Time, more func(in *install, checked bool) bool) {
	type event struct {
		in      *install
		checked bool
	}
	events := make(chan event, 2*len(ins))
	for _, in := range ins {
		go func() {
			select {
			case <-in.checked: // nil: never
				if !in.ended() { // ended first: its outcome alone counts
					events <- event{in, true}
				}
				<-in.done
			case <-in.done:
			}
			events <- event{in, false}
		}()
	}
	wait := time.NewTimer(installWait)
	defer wait.Stop()
	var limit <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		limit = t.C
	}
	for left := len(ins); left > 0; {
		var ev event
		select {
		case ev = <-events:
			if !ev.checked {
				left--
			}
		case <-wait.C:
		case <-limit:
			return
		}
		if !more(ev.in, ev.checked) {
			return
		}
	}
}

// pinned is the install's outcome once it has ended: its pin written
// to the lock file at lockPath if it is new.
func (in *install) pinned(lockPath string) error {
	if in.err != nil || in.change == nil {
		return in.err
	}
	return writePackagePins(lockPath, []PackageChange{*in.change})
}

// ended reports whether the install has ended.
func (in *install) ended() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// startInstalls begins installing the package servers' packages of
// po.c, in config order; each install's done is closed when it ends.
//
// Up to installsAtOnce packages install at once: a first start of a
// config with several package servers waited for each in turn (minutes
// for a few npm servers with native add-ons), and the store takes
// concurrent installs (a finished tree is renamed into place). Without
// po.keepGoing, the first error cancels the installs not yet ended.
func (po packageOptions) startInstalls(ctx context.Context) ([]*install, error) {
	pss, err := PackageServers(po.c)
	if err != nil || len(pss) == 0 {
		return nil, err
	}
	// A server that cannot start in this serve is not installed for it.
	pss = slices.DeleteFunc(pss, func(ps PackageServer) bool { return lacksEnvSecret(po.c, ps.Server) != nil })
	for _, ps := range pss {
		// An input serve refuses (your home dir, the state dir) fails
		// the start as a command server's does, before any download.
		if err := specconv.InputHidesState(ps.Server, specconv.Options{Base: po.base, StateDir: po.stateDir}); err != nil {
			return nil, configError(err)
		}
	}
	store := &pkginstall.Installer{Store: filepath.Join(po.stateDir, "packages")}
	if err := store.CleanStaging(stagingAge); err != nil && po.log != nil {
		po.log.Warn("cleaning the package store", "err", err)
	}
	if po.progress != nil {
		po.progress = &lockedWriter{w: po.progress}
	}
	ctx, cancel := context.WithCancel(ctx)
	ins := make([]*install, len(pss))
	sem := make(chan struct{}, installsAtOnce)
	var wg sync.WaitGroup
	for i, ps := range pss {
		in := &install{ps: ps, done: make(chan struct{}), checked: make(chan struct{})}
		ins[i] = in
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(in.done)
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				in.err = ctx.Err()
				return
			}
			in.pkg, in.change, in.err = po.installOne(ctx, ps, in.check)
			if in.err != nil && ctx.Err() != nil && !errors.Is(in.err, ctx.Err()) {
				// Cut short (serve stopped, another's error): say so, not
				// only how the install ended (npm killed: status 137).
				in.err = fmt.Errorf("%w (%w)", ctx.Err(), in.err)
			}
			if in.err != nil && !po.keepGoing {
				cancel() // the first error ends it: the others need not finish
			}
		}()
	}
	go func() {
		wg.Wait()
		cancel()
	}()
	return ins, nil
}

// results are the outcomes of ended installs as installPackages returns
// them.
func (po packageOptions) results(ins []*install) (pkgs map[string]specconv.Package, changes []PackageChange, failed map[string]error, err error) {
	if !po.keepGoing {
		// The first error in the config's order that is not the
		// cancellation of the others.
		for _, in := range ins {
			if in.err != nil && !errors.Is(in.err, context.Canceled) {
				return nil, nil, nil, in.err
			}
		}
	}
	pkgs = map[string]specconv.Package{}
	for _, in := range ins {
		if in.err != nil && po.keepGoing {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[in.ps.Server.Name] = in.err
			continue
		}
		if in.err != nil {
			return nil, nil, nil, in.err
		}
		pkgs[in.ps.Server.Name] = in.pkg
		if in.change != nil {
			changes = append(changes, *in.change)
		}
	}
	return pkgs, changes, failed, nil
}

// installOne installs one package server's package (by its pin if the
// lock file has one for it) and returns how to run it, and the pin to
// write if it is new; checked, if not nil, is the installer's Checked.
func (po packageOptions) installOne(ctx context.Context, ps PackageServer, checked func()) (specconv.Package, *PackageChange, error) {
	// A server whose input dir or a mount's source serve cannot show
	// (not made yet) never starts, whatever its package: said before a
	// download, and as the server's setup's failure, not the install's.
	// (An input serve refuses is the config's fault: startInstalls.)
	inDir, err := specconv.InputDir(ps.Server, po.base)
	if err != nil {
		return specconv.Package{}, nil, &SetupError{Server: ps.Server.Name, Err: fmt.Errorf("server %s: filesystem.input: %w", ps.Server.Name, err)}
	}
	for _, m := range ps.Server.Filesystem.Mounts {
		if err := specconv.MountSource(po.base, inDir, m); errors.Is(err, fs.ErrNotExist) || errors.Is(err, specconv.ErrNotDir) {
			return specconv.Package{}, nil, &SetupError{Server: ps.Server.Name, Err: fmt.Errorf("server %s: mount %s: %w", ps.Server.Name, m.Target, err)}
		}
	}
	lock, err := integrity.ReadLock(po.lockPath)
	if err != nil {
		return specconv.Package{}, nil, err
	}
	in, err := po.installer(ps.Server)
	if err != nil {
		return specconv.Package{}, nil, err
	}
	in.Checked = checked
	old, pinned := lock.Packages[ps.Server.Name]
	if pinned && (old.Source != ps.Source.String() || po.repin[ps.Server.Name]) {
		pinned = false // the config names another package or range, or update
	}
	pkg, err := po.install(ctx, in, ps, old, pinned)
	if err != nil {
		return specconv.Package{}, nil, err
	}
	run := specconv.Package{Dir: pkg.Dir, Args: pkg.Command(specconv.PackageTarget, ps.Args), Env: pkg.Env(specconv.PackageTarget)}
	if pinned {
		return run, nil, nil
	}
	return run, &PackageChange{Server: ps.Server.Name, Old: old, New: lockPin(pkg.Pin, ps.Source), pkg: pkg}, nil
}

// install installs one package server's package, by its pin if pinned.
func (po packageOptions) install(ctx context.Context, in *pkginstall.Installer, ps PackageServer, old integrity.PackagePin, pinned bool) (*pkginstall.Package, error) {
	name := ps.Server.Name
	if !pinned {
		pkg, err := in.Install(ctx, ps.Source, nil)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", name, err)
		}
		return pkg, nil
	}
	pin := pkginstall.Pin{Ecosystem: pkginstall.Ecosystem(old.Ecosystem), Name: old.Name, Version: old.Version,
		Integrity: old.Integrity, Lockfile: old.Lockfile}
	if po.verify {
		if err := in.Verify(ctx, pin); err != nil {
			return nil, po.pinError(name, pin, err)
		}
	}
	src := pin.Source()
	src.Bin = ps.Source.Bin
	pkg, err := installPinned(ctx, in, po.lockPath, name, src, pin)
	if err != nil {
		return nil, po.pinError(name, pin, err)
	}
	return pkg, nil
}

// pinError names the server and what to do about a pinned package the
// registry no longer serves as pinned.
func (po packageOptions) pinError(server string, pin pkginstall.Pin, err error) error {
	var ie *pkginstall.IntegrityError
	if errors.Is(err, pkginstall.ErrPinMismatch) || errors.Is(err, pkginstall.ErrLockfileMismatch) || errors.As(err, &ie) {
		msg := oneLine(err)
		for _, pre := range []string{"installing " + pin.String() + ": ", "pinned " + pin.String() + ": "} {
			msg = strings.TrimPrefix(msg, pre)
		}
		hint := po.trustHint
		if hint == "" {
			hint = "mcpbox update " + server
			// The update must read the config serve read, which the
			// project's default need not be (as a login's hint names it).
			hint += loginFlags(po.configPath, "", "")
		}
		return fmt.Errorf("server %s: refusing pinned package %s: %s (if the new bytes are trusted: %s)", server, pin, msg, hint)
	}
	return fmt.Errorf("server %s: installing pinned package %s: %w", server, pin, err)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// lockPin is the lock file's form of p, made from src.
func lockPin(p pkginstall.Pin, src pkginstall.Source) integrity.PackagePin {
	return integrity.PackagePin{Ecosystem: string(p.Ecosystem), Name: p.Name, Version: p.Version,
		Integrity: p.Integrity, Lockfile: p.Lockfile, Source: src.String()}
}

// writePackagePins records changes in the lock file.
func writePackagePins(lockPath string, changes []PackageChange) error {
	for _, ch := range changes {
		if err := keepPin(lockPath, ch.Server, ch.New, ch.pkg); err != nil {
			return err
		}
	}
	return nil
}

// installWait is how long serve's start waits for its packages before
// it serves without the ones still installing, which install on in the
// background (setup.go). A pinned package the store has installs well
// within it; a first install of an npm server takes from tens of
// seconds to minutes, which a client's initialize (60 s in the
// TypeScript SDK) must not wait for.
const installWait = 3 * time.Second

// aloneWait is how long serve's start waits, at most, for the registry
// to confirm a package when no server can run without one (only package
// servers, on a first start); mostly that takes a second or two. Then it
// serves with them all still installing: a session opens with none after
// the gateway's own wait (20 s), and they join it once installed. A
// stdio client gives a server's start 30 s (Claude Desktop) or a minute
// (the TypeScript SDK) and then ends serve, the installs with it: serve's
// wait and the session's must end within that, or a first start whose
// installs take minutes would never converge. A registry that stalls
// for all of aloneWait brings the two waits to 30 s: Claude Desktop's
// limit.
const aloneWait = 10 * time.Second

// installPackages installs the config's packages before any server
// starts, printing progress to stderr on a first install, and pins what
// they resolved to. A server whose package cannot be installed is left
// for the gateway to report and retry (setup.go), unless the options are
// strict; it returns the packages' install options for those retries.
// Unless strict, a package still installing after awaitInstalls installs
// on in the background (d.installing), if its server can be set up on
// its own (setsUpAlone); d.stopInstalls ends those installs.
func (d *daemon) installPackages(ctx context.Context, g *guard.Guard) (packageOptions, map[string]error, error) {
	lockPath := d.lock
	po := packageOptions{c: d.c, base: d.o.Base, stateDir: d.dir, configPath: d.o.ConfigPath,
		lockPath: lockPath, progress: d.o.Stderr, log: d.log, egress: installEgress(g), keepGoing: !d.o.Strict}
	if d.o.Strict {
		d.stopInstalls = d.setups.stop
		pkgs, changes, failed, err := installPackages(ctx, po)
		if err != nil {
			return po, nil, err
		}
		d.packages = pkgs
		return po, failed, writePackagePins(lockPath, changes)
	}
	ins, err := po.startInstalls(d.setups.ctx) // its cancel stops them
	d.stopInstalls = func() {
		d.setups.cancel()
		for _, in := range ins {
			<-in.done
		}
		d.setups.stop()
	}
	if err != nil {
		return po, nil, err
	}
	d.awaitInstalls(ins)
	var ended []*install
	for _, in := range ins {
		if !in.ended() && setsUpAlone(d.c, in.ps.Server) {
			if d.installing == nil {
				d.installing = map[string]*install{}
			}
			d.installing[in.ps.Server.Name] = in
			continue
		}
		<-in.done // a group member or a Kubernetes server: waited for
		ended = append(ended, in)
	}
	pkgs, changes, failed, err := po.results(ended)
	if err != nil {
		return po, nil, err
	}
	d.packages = pkgs
	return po, failed, writePackagePins(lockPath, changes)
}

// listerPackages installs and pins the config's packages for `mcpbox
// pin`, asking the registry whether existing pins still hold. A server
// whose package does not install is left out with why (failed), so that
// pin still reports the others, unless it is a group member: a group's
// sandbox is built for all its members, as serve does (wiring.servers).
func listerPackages(o ListOptions, lockPath string, log *slog.Logger) (pkgs map[string]specconv.Package, failed map[string]error, drift []string, err error) {
	pkgs, changes, failed, err := installPackages(context.Background(), packageOptions{c: o.Config, base: o.Base,
		stateDir: o.StateDir, configPath: o.ConfigPath, lockPath: lockPath, progress: o.Stderr, log: log, verify: true, keepGoing: true})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, s := range o.Config.Servers {
		if _, ok := pkgs[s.Name]; ok || failed[s.Name] != nil {
			continue
		}
		// Not installed for a secret it cannot start without (as serve
		// does): that is why, not a package missing from the store.
		if err := lacksEnvSecret(o.Config, s); err != nil {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[s.Name] = err
		}
	}
	for _, s := range o.Config.Servers {
		if err := failed[s.Name]; err != nil && strings.HasPrefix(s.Placement, config.PlacementGroup) {
			return nil, nil, nil, err
		}
	}
	if o.NoRecord {
		// What pin would record: the lock does not pin what the config
		// now asks for (pin --check counts them).
		for _, ch := range changes {
			was := "nothing"
			if ch.Old != (integrity.PackagePin{}) {
				was = ch.Old.String() + " (from " + ch.Old.Source + ")"
			}
			drift = append(drift, fmt.Sprintf("package of %s: %s (from %s) is not pinned: the lock pins %s (mcpbox pin %s records it)", ch.Server, ch.New, ch.New.Source, was, ch.Server))
		}
		return pkgs, failed, drift, nil
	}
	return pkgs, failed, nil, writePackagePins(lockPath, changes)
}

// PackageOf is pkginstall.FromCommand in the config's terms, for `mcpbox
// import` (importer.PackageOf): the package as a `package:` value. A
// command that names a bin apart from its package (npx -p PKG BIN) is no
// `package:` (which runs the package's own bin): it is recognised (ok)
// with pkg "", and stays a command, which serve treats all the same.
func PackageOf(argv []string) (pkg string, args []string, ok bool, err error) {
	src, args, ok, err := pkginstall.FromCommand(argv)
	if !ok || err != nil {
		return "", nil, false, err
	}
	if src.Bin != "" {
		return "", nil, true, nil
	}
	return src.String(), args, true, nil
}

// HoldsData is importer.Host's HoldsData: whether the host file path
// ("~/" for the home directory) is a regular file with data in it.
func HoldsData(path string) bool {
	fi, err := os.Stat(specconv.Resolve("", path))
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// Homes is importer.Host's Homes: $HOME, and where its links lead; none
// when it is unknown.
func Homes() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(home); err == nil && real != home {
		return []string{home, real}
	}
	return []string{home}
}

// IsDir is importer.Host's IsDir: whether the host path ("~/" for the
// home directory) is a directory.
func IsDir(path string) bool {
	fi, err := os.Stat(specconv.Resolve("", path))
	return err == nil && fi.IsDir()
}

// installEgress audits the connections of the install sandboxes as
// egress records of the server, marked with detail phase "package
// install" (a server's own connections have no phase).
func installEgress(g *guard.Guard) func(string, egress.Event) {
	return func(server string, ev egress.Event) {
		r := audit.Record{Time: ev.Time, Event: audit.EventEgress, Server: server, Sandbox: ev.SandboxID,
			Decision: ev.Decision, Rule: ev.Rule, Duration: ev.Duration,
			Domains: []audit.Domain{{Host: ev.Host, Port: ev.Port, Decision: ev.Decision, BytesUp: ev.BytesUp, BytesDown: ev.BytesDown}},
			Detail:  map[string]string{"phase": "package install"}}
		if ev.Reason != "" {
			r.Detail["reason"] = ev.Reason
		}
		g.Record(r)
	}
}
