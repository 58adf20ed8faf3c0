//go:build unix && !linux

package procgroup

import (
	"fmt"
	"os"
)

// KeepWorks reports whether Keep can hold a command's whole tree here:
// not without Linux's child subreaper.
const KeepWorks = false

// KeeperFD is Keep's starter's pipe (see keep_linux.go).
const KeeperFD = 3

// Keep is Linux's only; here it refuses.
func Keep(argv []string) {
	fmt.Fprintln(os.Stderr, "ctxgraphd keep: needs Linux's child subreaper")
	os.Exit(127)
}
