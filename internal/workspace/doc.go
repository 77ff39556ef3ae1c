// Package workspace seeds, snapshots, restores, exports and diffs the
// directories a sandbox works in: its output dir and the upper dir of its
// overlay.
//
// Layout (layout.go): under a root (the state dir's workspaces/) each
// server has a workspace per agent, or per session of an agent, named by
// a Scope of plain strings (this package imports no gateway): Base is
// ROOT/AGENT/SERVER[/sessions/ID], with the output and the overlay's
// upper and work dirs beneath it, made without following a symlink;
// SeedPart fills a new one from a template or snapshot; ArtifactsDir is
// where Export copies a sandbox's artifacts. Package launch decides when.
//
// Everything beneath those directories was written by a workload we do not
// trust, and this package reads and writes them with the gateway's
// privileges, so every operation below a root is done with *at system
// calls one path component at a time, each with O_NOFOLLOW (directories
// also O_DIRECTORY): a symlink is never followed, whether it was planted
// before we started or swapped in while we walk. Roots themselves (the
// paths the caller passes) are opened normally: they come from config and
// the gateway's own layout, not from the sandbox. We do not use openat2
// RESOLVE_BENEATH for these trees: the per-component walk gives the same
// guarantee on every kernel and keeps one code path.
//
// Host paths a project names (HostPath, MakeHostDir): a config's sources,
// template and artifacts dir, and the default's ./mcpbox-out, are names
// inside a project mcpbox must not trust. Beneath a root the caller
// vouches for (the config's dir, the input, the home dir, /), they are
// walked one component at a time with openat2 RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS, missing dirs made with mkdirat, and a symlink is
// refused (ErrSymlink) with its target named: a shipped mcpbox-out ->
// ~/.ssh cannot choose what a sandbox may write. Protected then refuses
// writable dirs in or above system dirs, the home dir and its credential
// dirs, the state dir and the input (ErrProtected).
//
// Reading untrusted trees:
//   - a name is lstat'ed (fstatat AT_SYMLINK_NOFOLLOW) first, and only a
//     regular file is opened, with O_NOFOLLOW|O_NONBLOCK|O_NOCTTY, then
//     fstat'ed to check that the inode opened is the regular file we
//     lstat'ed. Device nodes, FIFOs and sockets are never opened: a FIFO
//     would block the reader and a device open can have side effects.
//   - a regular file with more than one link is refused for export and
//     must have all its names inside the tree to be snapshotted. Copying
//     runs with the gateway's credentials, and link(2) needs no read
//     permission on its source (without fs.protected_hardlinks, and
//     Landlock checks only the directories): a workload that can name a
//     file on the same mount, but not read it, could link it into its
//     output and have the gateway read it out. Counting the names we see
//     against st_nlink catches every such link.
//   - depth is bounded (maxDepth components) and so is the size and entry
//     count of what Seed and Restore extract.
//
// Writing (Seed, Restore, Export) only creates: files with O_CREAT|O_EXCL|
// O_NOFOLLOW, directories with mkdirat, symlinks with symlinkat, all
// relative to a parent opened by the per-component walk. A tar entry
// naming an absolute path, a ".." component, or a path through a symlink
// it created earlier fails with ErrUnsafeEntry; nothing is ever written
// outside the destination. Symlinks are recreated as symlinks with their
// target verbatim: they are only ever resolved inside the sandbox. Modes
// keep the permission and sticky bits, never setuid/setgid; ownership is
// not restored (files belong to the gateway's user).
//
// Overlay upper dirs carry deletions: a whiteout (character device 0/0)
// and an opaque directory (xattr trusted.overlay.opaque or
// user.overlay.opaque = "y"). Snapshot stores a whiteout as an empty
// regular-file entry with the PAX record MCPBOX.whiteout=1 (so plain tar
// never makes a device) and an opaque directory as a directory entry with
// MCPBOX.opaque=<xattr name>; Restore recreates both, which needs
// CAP_MKNOD or a kernel that lets user namespaces make 0/0 whiteouts.
// Xattr-only whiteouts (overlay.whiteout), redirect_dir and metacopy
// uppers are not understood.
package workspace
