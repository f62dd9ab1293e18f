package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
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

// checkStore opens the store in --dir (creating it with --create) and
// closes it: training then runs without holding the store's lock.
func checkStore(e *env) error {
	db, err := openStore(e)
	if err != nil {
		return err
	}
	return db.Close()
}

// putAdapter stores a for model under id in the store in --dir, durably.
func putAdapter(e *env, model format.Fingerprint, id string, a *adapter.Adapter) (err error) {
	db, err := openStore(e)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	return adapter.Put(db, model, id, a)
}

// warnLogger logs the store's warnings and errors to w; its routine Info
// messages would clutter the output.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
