//go:build race

package team_test

// raceEnabled: the race detector slows the long races of this package
// about tenfold; they run fewer rounds under it.
const raceEnabled = true
