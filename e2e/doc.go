// Package e2e holds the end-to-end tests of ctxgraphd: the real ctxgraphd
// binary, built for the test run, drives the real Claude Code CLI against the
// scripted model on loopback. Nothing of the CLI is faked.
package e2e
