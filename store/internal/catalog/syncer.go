package catalog

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Syncer syncs the catalog's WAL in the background after unsynced commits
// (CommitUnsynced), so that they reach the disk within about one WAL fsync
// of being made without their committer waiting for it. Requests that
// arrive while a sync runs are all covered by the next one: each sync
// covers every batch committed before it started. Kick asks for a sync;
// Stop waits for the one asked for last, then ends the goroutine.
//
// A failed sync is remembered (Err, wrapping ErrFailed like a failed
// Commit): the WAL can no longer be trusted, so the store refuses later
// writes, and the batches it lost are applied again from the blob log at
// the next Open.
type Syncer struct {
	c       *Catalog
	observe func(time.Duration)
	kick    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	err    error
	closed bool
}

// StartSyncer starts a syncer of c. observe, if not nil, is given each
// sync's duration, from the syncer's goroutine.
func (c *Catalog) StartSyncer(observe func(time.Duration)) *Syncer {
	s := &Syncer{c: c, observe: observe, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Kick asks for a sync of every batch committed so far; it never blocks.
// After Stop it does nothing.
func (s *Syncer) Kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.kick <- struct{}{}:
	default: // a sync is already asked for; it will cover this commit
	}
}

// Err returns the first failed sync's error, or nil.
func (s *Syncer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop waits for the sync asked for last, ends the goroutine and returns
// Err. Call it before the catalog closes; a second Stop only returns Err.
func (s *Syncer) Stop() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.kick)
	}
	s.mu.Unlock()
	<-s.done
	return s.Err()
}

func (s *Syncer) run() {
	defer close(s.done)
	for range s.kick {
		if s.Err() != nil {
			continue // drain: the WAL failed, nothing more can be synced
		}
		start := time.Now()
		err := s.c.SyncWAL()
		if s.observe != nil {
			s.observe(time.Since(start))
		}
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	}
}

// SyncWAL makes every batch committed so far durable: it commits an empty
// batch with pebble.Sync, which waits for the WAL to be synced up to it and
// so over every batch before it. Errors are Commit's.
func (c *Catalog) SyncWAL() error {
	b := c.DB.NewBatch()
	defer b.Close()
	if err := b.LogData(nil, nil); err != nil {
		return fmt.Errorf("store: catalog sync: %w", err)
	}
	return commit(b, pebble.Sync)
}
