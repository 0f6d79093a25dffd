//go:build !faults

package hook

// faultPoint is where a hook built with the faults tag injects a fault
// for the crash tests (fault_on.go); a default build has none.
func (h *hook) faultPoint(string) {}
