// Package pkginstall installs the npm and PyPI packages that MCP servers
// are shipped as into a content-addressed store, so that a server sandbox
// can run them with no network, from a read-only tree, pinned to the exact
// bytes first installed.
//
// It parses package sources (`npm:@scope/name@^1.2`, `pypi:name@1.0`)
// and recognises the commands client configs use to fetch and run one
// (npx, npm exec, pnpm/yarn dlx, bunx, uvx, pipx run). For npm it reads
// the user's registry configuration (.npmrc, NPM_CONFIG_REGISTRY, scoped
// registries, per-registry tokens), resolves a version, dist-tag or range
// against the registry from the host, downloads the package's archive and
// checks it against the registry's sha512 integrity (and a pin's), then
// installs the package with its dependencies in two sandboxes:
//
//   - fetching: `npm install --ignore-scripts`, egress only to the
//     registry hosts, the credentials in a secret file (never on a host
//     disk, never in the tree);
//   - scripts: `npm rebuild` runs the install scripts with no network and
//     no credentials; they see the tree being built and nothing of the
//     host.
//
// The generated package-lock.json must record the verified top-level
// integrity and a sha512 for every dependency; its hash is part of the
// Pin. The tree is built under STORE/.tmp and renamed into
// STORE/npm/NAME/VERSION/sha512-HEX, so an entry is complete or absent;
// a lock per entry (STORE/.locks) makes installs of the same package by
// several gateways at once build it once, the others waiting for it.
// A later install of a pinned or exact version finds the entry without
// network; InstallLocked reinstalls a pin with exactly its lockfile
// (npm ci) where the store lacks it. Package.Mount, Package.Command and
// Package.Env give a server sandbox the read-only, executable bind, the
// argv (the host's node or python3 on the bin file) and its environment.
// Installer.Verify asks the registry whether a pin still holds.
//
// PyPI: the simple index (PIP_INDEX_URL) is read from the host; the
// chosen pure-Python wheel is downloaded and checked against the index's
// sha256, then the host's pip installs it with its dependencies
// (--only-binary=:all:, so no package code runs at install time) in a
// sandbox whose only egress is the index and its file hosts, the index
// credentials in a secret file. pip's report becomes requirements.lock
// (--require-hashes form), whose hash is pinned.
//
// It must not: run package code outside a sandbox or with credentials;
// put credentials into the store, a log or a server sandbox; leave a
// half-built entry in the store; follow a bin path out of the package.
//
// Threats handled: a registry (or a man in the middle of the sandbox's
// fetch) serving other bytes than its metadata or the pin names
// (refused: IntegrityError, ErrPinMismatch); hostile install scripts
// (contained: no host files, no network, no tokens); hostile metadata
// (names and versions are checked before they become paths; size limits
// on metadata and archives). Not handled: a registry that serves
// malicious code under a new version that the user then chooses to pin,
// and install scripts that reach the registry through a dependency of
// their own at run time (they have no network at all).
package pkginstall
