//go:build unix

package oidcpeer

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// ownGroup puts the peer in a process group of its own, so killGroup also
// ends anything node started.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// lock takes an exclusive advisory lock (flock) on path, an existing file.
// Each call opens the file anew, so it excludes other goroutines as well as
// other processes; the lock dies with its process, so a killed test leaves
// none behind.
func lock(path string) (unlock func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}
