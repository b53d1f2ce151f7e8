// Package admittest helps tests of gated code wait for a gate to reach a
// state, instead of sleeping and hoping.
//
// # Usage
//
//	// eight requests in flight, holding the db gate's eight slots:
//	for range 8 {
//		go client.Get(url + "/slow")
//	}
//	admittest.WaitInUse(t, db, 8)  // all eight slots are held
//	go client.Get(url + "/slow")
//	admittest.WaitQueued(t, db, 1) // the ninth waits in the queue
//	release()                      // let the held work finish
//	admittest.WaitIdle(t, db)      // nothing held, nobody queued
//
// Each helper returns as soon as the gate is in the state asked for, and
// fails the test with t.Fatalf, showing what the gate held instead, when
// DefaultTimeout (10 s) passes first; Wait takes a timeout and any
// condition on the gate's Stats. Like every function that calls Fatalf,
// they must be called from the test's own goroutine.
//
// # Under testing/synctest
//
// The helpers poll with short sleeps (50 µs at first, doubling up to
// 5 ms). Inside a synctest bubble a sleep ends only when every other
// goroutine in the bubble is durably blocked, on the fake clock: each poll
// then looks at a gate that has settled, and waiting costs no real time at
// all. The timeout is measured on the same clock, so a state that is never
// reached fails the test at once in real time. Outside a bubble the cost
// is the polling, a few milliseconds at most past the moment the state is
// reached.
package admittest
