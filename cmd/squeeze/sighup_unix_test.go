//go:build !windows

package main

import (
	"os"
	"syscall"
	"testing"
)

// sendSIGHUP sends this process SIGHUP, as an operator's kill -HUP would.
func sendSIGHUP(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
