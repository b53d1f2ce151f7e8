// Package testutil holds small helpers shared by sluice's tests.
package testutil

import (
	"bytes"
	"flag"
	"strconv"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer safe for concurrent Write and String: a
// server's log goes into it while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Eventually polls cond every millisecond until it holds, and fails the
// test if it does not within 10 seconds. It is for state reached through
// real sockets and other goroutines, never for pacing.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, 10*time.Second, what, cond)
}

// EventuallyWithin is Eventually with the bound d: for a package whose
// awaited states follow their cause within milliseconds, so that a test
// whose state never comes fails soon.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// RapidMain runs a package's tests the way sluice's rapid property tests
// want: rapid saves every failing case under testdata/ by default, and a
// test run must never write into the working tree, so that is turned off
// (a failure prints the seed that reproduces it instead). checks, when
// positive and not set on the command line, raises rapid's default of
// 100 cases (ignored with -short). It returns what m.Run returns.
func RapidMain(m *testing.M, checks int) int {
	flag.Parse()
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		panic(err)
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if checks > 0 && !set && !testing.Short() {
		if err := flag.Set("rapid.checks", strconv.Itoa(checks)); err != nil {
			panic(err)
		}
	}
	return m.Run()
}
