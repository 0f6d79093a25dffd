//go:build faults

package hook

import (
	"os"
	"syscall"
	"time"
)

// FaultEnv names the fault a hook built with the faults tag injects, for
// the crash tests: crash-before-write, crash-after-write and
// crash-during-ack SIGKILL the hook at that point, sleep-after-write
// outlasts its budget. A default build has no fault points.
const FaultEnv = "TEAMBUS_HOOK_FAULT"

// faultPoint injects the fault FaultEnv names if it is at point:
// "before-write", "after-write" or "first-ack".
func (h *hook) faultPoint(point string) {
	injectHookFault(h, h.cfg.Getenv(FaultEnv), point)
}

func injectHookFault(h *hook, fault, point string) {
	switch {
	case fault == "crash-"+point, fault == "crash-during-ack" && point == "first-ack":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case fault == "sleep-after-write" && point == "after-write":
		time.Sleep(h.cfg.Budget + 10*time.Second)
	}
}
