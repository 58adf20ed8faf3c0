package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newVersionCmd) }

// version is set at build time for releases (-ldflags "-X main.version=v1.2.3");
// otherwise it is read from the module and the VCS information Go embeds.
var version = ""

// versionLine says which ctxgraphd this is, precisely enough for a bug
// report: the version, the commit and whether the tree was clean, the Go
// that built it.
func versionLine() string {
	v, rev, dirty, when := version, "", false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "vcs.time":
				when = s.Value
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	line := "ctxgraphd " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+changes"
		}
		line += " (" + rev
		if when != "" {
			line += ", " + when
		}
		line += ")"
	}
	return fmt.Sprintf("%s %s %s/%s", line, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of ctxgraphd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
