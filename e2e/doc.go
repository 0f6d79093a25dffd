// Package e2e holds the end-to-end tests: a real embedded bus node in the
// test process, and the built teambus binary run as real lead and teammate
// sidecar processes beside real "agent" processes, killed with SIGKILL.
// Timeouts come from team policy set to seconds; the tests wait for
// conditions with a poller and never assert on timing.
package e2e
