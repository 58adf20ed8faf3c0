package procgroup

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Members lists the live processes whose process group is pgid, read from
// /proc; a process that died and waits to be reaped is not one.
func Members(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: fields
		// are counted from the last ')'. After it: state, ppid, pgrp.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 {
			continue
		}
		if f[0] == "Z" || f[0] == "X" {
			continue // dead, waiting to be reaped: nothing left to kill
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Alive reports whether a live process is left in the group.
func Alive(pgid int) bool {
	members, err := Members(pgid)
	return err == nil && len(members) > 0
}
