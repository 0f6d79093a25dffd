// Package clock is the time source of the sidecars: the wall clock in
// production, a fake clock that a test advances by hand. Timers and
// tickers of the fake fire when the test moves its time past their
// deadline, so a test of timeouts takes microseconds and never sleeps.
package clock
