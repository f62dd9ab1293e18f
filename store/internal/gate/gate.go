// Package gate counts a DB's calls in flight so that Close can refuse new
// ones and wait for those running.
package gate

import "sync/atomic"

// Gate counts the DB's calls in flight so that Close can refuse new ones
// and wait for those running. Unlike a sync.RWMutex held shared by each
// call, it lets a call nest inside another (a Get from a Headers callback)
// without deadlocking against a waiting Close.
type Gate struct {
	state   atomic.Int64  // calls in flight, plus closedBit once closed
	drained chan struct{} // signalled when the last call leaves a closed gate
}

const closedBit = 1 << 62

// New returns an open gate.
func New() *Gate { return &Gate{drained: make(chan struct{}, 1)} }

// Enter admits a call; false once the gate is closed. Every true is paired
// with Leave.
func (g *Gate) Enter() bool {
	if g.state.Add(1)&closedBit != 0 {
		g.Leave()
		return false
	}
	return true
}

// Leave ends a call.
func (g *Gate) Leave() {
	if g.state.Add(-1) == closedBit {
		select {
		case g.drained <- struct{}{}:
		default:
		}
	}
}

// Close shuts the gate and waits until no call is in flight. It reports
// false if the gate was already closed. It must not be called from inside
// an admitted call.
func (g *Gate) Close() bool {
	if g.state.Or(closedBit)&closedBit != 0 {
		return false
	}
	for g.state.Load() != closedBit {
		<-g.drained
	}
	return true
}
