// Package importer turns the MCP server entries of a client's config file
// (Claude Desktop, Claude Code, Cursor, VS Code) into an mcpbox config,
// and rewrites the client's file so that it launches mcpbox instead.
//
// It is a pure transform of bytes: it reads no files, runs nothing and
// prints nothing. What the user should know (skipped servers, renames,
// redacted credentials) comes back as notes, and the environment
// variables the generated config reads as a list; internal/cli reads the
// input, resolves flags and prints. Credentials are never copied: the
// names that count as credential-like are config.CredentialName's, the
// same ones config.Warnings flags in plain env, so an imported config
// draws no such warning.
//
// Layering: importer sits above internal/config (and internal/redact,
// for token-shaped values) and below internal/cli; it must not import cli.
package importer
