//go:build !unix

package oidcpeer

import (
	"os/exec"
	"sync"
)

func ownGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

var installMu sync.Mutex

// lock serialises installs within this process only; there is no portable
// file lock outside unix.
func lock(string) (unlock func(), err error) {
	installMu.Lock()
	return installMu.Unlock, nil
}
