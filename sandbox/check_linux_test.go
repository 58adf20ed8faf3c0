package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBin returns a directory holding an executable file for each name.
func fakeBin(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckLinux(t *testing.T) {
	both := fakeBin(t, "bwrap", "socat")
	onlySocat := fakeBin(t, "socat")
	onlyBwrap := fakeBin(t, "bwrap")
	notExecutable := t.TempDir()
	os.WriteFile(filepath.Join(notExecutable, "bwrap"), nil, 0o644)
	// A relative PATH entry is not searched, even when it has both.
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(cwd, both)
	if err != nil {
		t.Fatal(err)
	}

	denied := errors.New("exit status 1")
	tests := []struct {
		name      string
		path      string
		trialErr  error
		wantTrial bool     // the trial sandbox must have run
		want      []string // in the error, or no error when empty
	}{
		{name: "both found and the trial works", path: "/nonexistent:" + both, wantTrial: true},
		{name: "the tools may be in different directories", path: onlySocat + ":" + onlyBwrap, wantTrial: true},
		{name: "bwrap missing", path: onlySocat, want: []string{
			"bwrap not found on PATH", "install bubblewrap and socat: apt install bubblewrap socat (Debian/Ubuntu), dnf install bubblewrap socat (Fedora)",
		}},
		{name: "socat missing", path: onlyBwrap, want: []string{"socat not found on PATH"}},
		{name: "both missing", path: "", want: []string{"bwrap and socat not found on PATH"}},
		{name: "a bwrap that cannot be executed is missing", path: notExecutable + ":" + onlySocat, want: []string{"bwrap not found"}},
		{name: "relative entries are not searched", path: rel + ":.", want: []string{"bwrap and socat not found"}},
		{name: "a relative entry is passed over, not the end of the search", path: rel + "::" + both, wantTrial: true},
		{name: "the trial fails", path: both, trialErr: denied, wantTrial: true, want: []string{
			"bubblewrap cannot create a sandbox here",
			"`" + filepath.Join(both, "bwrap") + " --new-session --die-with-parent --unshare-user --unshare-pid --unshare-net --ro-bind / / --dev /dev --proc /proc -- /bin/true` failed (exit status 1)",
			`"bwrap: setting up uid map: Permission denied"`,
			"user namespaces are probably restricted",
			"Ubuntu 24.04", "kernel.apparmor_restrict_unprivileged_userns",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			h := host{path: tt.path, run: func(_ context.Context, name string, args ...string) ([]byte, error) {
				ran = append([]string{name}, args...)
				if tt.trialErr != nil {
					return []byte("bwrap: setting up uid map: Permission denied\n"), tt.trialErr
				}
				return nil, nil
			}}
			err := h.check(t.Context())
			if tt.wantTrial != (ran != nil) {
				t.Errorf("trial ran: %v, want %v", ran != nil, tt.wantTrial)
			}
			if ran != nil && !slices.Equal(ran[1:], trialArgs) {
				t.Errorf("trial %q, want bwrap %q", ran, trialArgs)
			}
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("check = %v, want an error wrapping ErrUnavailable", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestCheckOnThisMachine runs the real check: where bubblewrap is installed
// the sandbox must work, and CI machines must have it.
func TestCheckOnThisMachine(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI machines must have bubblewrap and socat: apt install bubblewrap socat")
		}
		t.Skip("skipping: bubblewrap is not installed (apt install bubblewrap socat)")
	}
	if err := Check(t.Context()); err != nil {
		t.Fatalf("Check on a machine with bwrap: %v", err)
	}
}
