package redlocksql_test

import (
	"os/exec"
	"syscall"
)

// diesWithParent asks Linux to kill cmd when the test process dies, so that
// a killed test run leaves no postgres behind (unless cmd changes user:
// setpriv drops the request with its credentials; cleanups stop it then).
func diesWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
