// Package chaos is fencelock's fault-injection harness: holders loop
// acquire → fenced read → compute → fenced write → release against a
// shared fenced resource while a nemesis injects faults, every operation
// is recorded with its call and return times, and each run's history is
// checked with porcupine against FencedRegister plus the invariants in
// Invariants. The scenarios are the tests of this module; see README.md.
package chaos
