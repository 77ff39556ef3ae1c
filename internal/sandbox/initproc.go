package sandbox

import "mcpbox/internal/sandbox/initproc"

// The sandbox's init is package initproc, apart so that the lean init
// binary (cmd/mcpbox-init) links none of the host side's packages; these
// are the names the host side knows its shared parts by.

type (
	pathRule   = initproc.PathRule
	secretFile = initproc.SecretFile
)

const (
	sandboxUID  = initproc.SandboxUID
	sandboxUser = initproc.SandboxUser
	sandboxHome = initproc.SandboxHome
	proxySocket = initproc.ProxySocket
	proxyAddr   = initproc.ProxyAddr
	maxFDs      = initproc.MaxFDs
	warmMsgMax  = initproc.WarmMsgMax
)
