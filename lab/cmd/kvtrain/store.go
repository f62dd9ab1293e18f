package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/store"
)

// openStore opens the store in --dir for writing. A missing --dir is a
// usage error; a directory that holds no store is a failure unless
// --create is given, so that a mistyped --dir never gets an empty store.
func openStore(e *env) (*store.DB, error) {
	if e.dir == "" {
		return nil, fmt.Errorf("%w: --dir is required", errUsage)
	}
	db, err := store.Open(e.dir, &store.Options{MustExist: !e.create, Logger: warnLogger(e.stderr)})
	if !e.create && errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w (pass --create to make a new store there)", err)
	}
	return db, err
}

// begin is every verb's start: check its flags, require --dir (before
// the model loads, so a usage error costs nothing), load the model and
// open the store, which the caller closes.
func begin(e *env, check func() error, mf *modelFlags) (*llama.Model, format.Fingerprint, *store.DB, error) {
	var fp format.Fingerprint
	if err := check(); err != nil {
		return nil, fp, nil, err
	}
	if e.dir == "" {
		return nil, fp, nil, fmt.Errorf("%w: --dir is required", errUsage)
	}
	m, fp, err := mf.load()
	if err != nil {
		return nil, fp, nil, err
	}
	db, err := openStore(e)
	if err != nil {
		return nil, fp, nil, err
	}
	return m, fp, db, nil
}

// storeAdapter stores a in db for model under id, or under its content
// id when id is "", durably, and returns the id.
func storeAdapter(db *store.DB, model format.Fingerprint, id string, a *adapter.Adapter) (string, error) {
	if id == "" {
		id = a.ID()
	}
	return id, adapter.Put(db, model, id, a)
}

// warnLogger logs the store's warnings and errors to w; its routine Info
// messages would clutter the output.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
