package sandbox

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckDarwin(t *testing.T) {
	if err := (host{sandboxExec: "/usr/bin/sandbox-exec"}).check(t.Context()); err != nil {
		t.Errorf("check with the system's sandbox-exec: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "sandbox-exec")
	err := host{sandboxExec: missing}.check(t.Context())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), missing+" is missing") || !strings.Contains(err.Error(), "part of macOS") {
		t.Errorf("check without sandbox-exec = %v", err)
	}
}
