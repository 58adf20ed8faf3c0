//go:build !linux && !darwin

package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckOther(t *testing.T) {
	err := host{goos: "plan9"}.check(t.Context())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "this system is plan9: run ctxgraphd on Linux or macOS") {
		t.Errorf("check = %v", err)
	}
}
