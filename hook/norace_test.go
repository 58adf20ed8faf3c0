//go:build !race

package hook

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
