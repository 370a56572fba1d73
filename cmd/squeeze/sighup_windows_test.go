//go:build windows

package main

import "testing"

// sendSIGHUP: Windows has no way to send a process SIGHUP, so the tests of
// what the proxy does on it are skipped there.
func sendSIGHUP(t *testing.T) {
	t.Helper()
	t.Skip("Windows cannot send SIGHUP")
}
