package zktest

import "syscall"

// sysProcAttr puts the JVM in its own process group (Stop kills the group)
// and asks Linux to SIGKILL it when the thread that started it exits (see
// Server.spawn: that thread lives exactly as long as the JVM).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
