package store

import "fmt"

// write runs one writer call and guarantees what every writer needs: the
// call is admitted by the gate (ErrClosed after Close), refused on a
// read-only store (ErrReadOnly naming op), checks its arguments with
// prepare (nil for none) before it waits for other writers, and runs apply
// only while it holds the writer lock and the catalog has not failed (the
// remembered failure is returned otherwise). An error a full disk caused
// wraps ErrNoSpace (space.go). prepare runs outside the lock
// so that validation and encoding never delay other writers.
func (db *DB) write(op string, prepare, apply func() error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	if db.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, op)
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return err
		}
	}
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if db.failed == nil {
		db.failed = db.syncFailure()
	}
	if db.failed != nil {
		return noSpace(db.failed)
	}
	return noSpace(apply())
}

// exclusive runs fn admitted by the gate and holding the writer lock, so
// that no writer runs meanwhile; unlike write it works on a read-only or
// failed store (Check reads, it does not write).
func (db *DB) exclusive(fn func() error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	return fn()
}
