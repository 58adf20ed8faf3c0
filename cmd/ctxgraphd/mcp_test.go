package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRunsGetTheLeanMCPServerBesideTheBinary: the lean ctxgraphd-mcp beside
// the binary is every run's MCP server; without it (or when it cannot be
// executed), the binary's own mcp subcommand.
func TestRunsGetTheLeanMCPServerBesideTheBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "ctxgraphd")
	lean := filepath.Join(dir, "ctxgraphd-mcp")
	if got, want := mcpCommandBeside(exe), []string{exe, "mcp"}; !slices.Equal(got, want) {
		t.Errorf("without ctxgraphd-mcp: %q, want %q", got, want)
	}
	if err := os.WriteFile(lean, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := mcpCommandBeside(exe), []string{exe, "mcp"}; !slices.Equal(got, want) {
		t.Errorf("with a ctxgraphd-mcp no one may execute: %q, want %q", got, want)
	}
	if err := os.Chmod(lean, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := mcpCommandBeside(exe), []string{lean}; !slices.Equal(got, want) {
		t.Errorf("with ctxgraphd-mcp: %q, want %q", got, want)
	}
}
