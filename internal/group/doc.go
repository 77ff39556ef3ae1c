// Package group runs several stdio MCP servers in one sandbox (config
// placement group:NAME). Inside the sandbox, Supervise (mcpbox's hidden
// __group command) starts the members and multiplexes their stdin and
// stdout over its own; outside, a Mux splits that stream again into one
// pair of pipes per member, which the gateway uses like any server's.
//
// The wire between them is line based, one message per line:
//
//	N JSON          a message to or from member N
//	!start N        start member N (gateway → supervisor)
//	!stop N         stop member N
//	!exit N CODE    member N has ended (supervisor → gateway)
//
// The members of a group share one sandbox, uid and workspace: a group is
// one trust domain, and a member can read what the others hold.
package group
