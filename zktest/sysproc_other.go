//go:build !linux

package zktest

import "syscall"

// sysProcAttr puts the JVM in its own process group (Stop kills the group).
// Outside Linux there is no parent-death signal: a JVM outlives a test binary
// killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
