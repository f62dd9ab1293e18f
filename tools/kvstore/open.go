package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

// openStore opens the store in --dir; read-only unless write. A missing
// --dir is a usage error; a directory that holds no store is a failure,
// except that a writable open (import, adapter) creates the store when
// --create is given: a mistyped --dir never gets an empty store.
func openStore(e *env, write bool) (*store.DB, error) {
	if e.dir == "" {
		return nil, fmt.Errorf("%w: --dir is required", errUsage)
	}
	db, err := store.Open(e.dir, &store.Options{ReadOnly: !write, MustExist: write && !e.create, LockWait: e.lockWait, Logger: warnLogger(e.stderr)})
	if write && !e.create && errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w (pass --create to make a new store there)", err)
	}
	return db, err
}

// openExisting opens the store in --dir for writing, failing (and creating
// nothing) when the directory holds no store: maintenance verbs (rm, gc,
// compact) on a mistyped --dir must not leave an empty store behind.
func openExisting(e *env) (*store.DB, error) {
	if e.dir == "" {
		return nil, fmt.Errorf("%w: --dir is required", errUsage)
	}
	return store.Open(e.dir, &store.Options{MustExist: true, LockWait: e.lockWait, Logger: warnLogger(e.stderr)})
}

// warnLogger logs the store's warnings and errors to w; its routine Info
// messages (open, compaction summaries) would clutter a command's output.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// errStop ends a Headers walk early.
var errStop = errors.New("stop")

// checkIDs refuses id arguments (packet or context) that are not 4 to 64
// hex digits.
func checkIDs(args ...string) error {
	for _, arg := range args {
		if len(arg) < 4 || len(arg) > 64 {
			return fmt.Errorf("%w: id %q: want 4 to 64 hex digits", errUsage, arg)
		}
		if _, err := hex.DecodeString(arg[:len(arg)&^1] + strings.Repeat("0", len(arg)&1) + arg[len(arg)&^1:]); err != nil {
			return fmt.Errorf("%w: id %q is not hex", errUsage, arg)
		}
	}
	return nil
}

// findPacket returns the header of the one packet whose id starts with
// the hex prefix arg (in namespace ns, when ns is not empty); arg passed
// checkIDs. A prefix that matches several packets is a usage error.
func findPacket(db *store.DB, arg, ns string) (*format.PacketHeader, error) {
	found, err := matchPackets(db, arg, ns)
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, notFound(db, "packet", arg, ns, false)
	case len(found) > 1:
		return nil, fmt.Errorf("%w: packet id %s is ambiguous: %d packets match (give more digits or --ns)", errUsage, arg, len(found))
	}
	return found[0], nil
}

// matchPackets returns the headers of every packet whose id starts with
// the hex prefix arg (in namespace ns, when ns is not empty).
func matchPackets(db *store.DB, arg, ns string) ([]*format.PacketHeader, error) {
	prefix := strings.ToLower(arg)
	var found []*format.PacketHeader
	err := db.Headers(func(h *format.PacketHeader) error {
		if (ns == "" || h.Namespace == ns) && strings.HasPrefix(h.ID.String(), prefix) {
			found = append(found, h)
		}
		return nil
	})
	return found, err
}

// addrFlag adds --addr to a read verb: the verb then asks a live store's
// admin handler (package admin) at that URL instead of opening --dir.
func addrFlag(fs *pflag.FlagSet, e *env) {
	fs.StringVar(&e.addr, "addr", "", "ask a live store's admin handler at this URL (http://host:port/prefix) instead of opening --dir")
}

// notFound is the error for an id prefix arg that matches no packet (nor,
// with contexts, span memory context) under the --ns filter ns: with a
// filter it says in which other namespaces the id is, or that it is in
// none, so that a wrong --ns is not taken for a missing packet.
func notFound(db *store.DB, kind, arg, ns string, contexts bool) error {
	if ns == "" {
		return fmt.Errorf("%w: no %s %s", store.ErrNotFound, kind, arg)
	}
	prefix := strings.ToLower(arg)
	seen := map[string]bool{}
	var others []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			others = append(others, strconv.Quote(n))
		}
	}
	err := db.Headers(func(h *format.PacketHeader) error {
		if strings.HasPrefix(h.ID.String(), prefix) {
			add(h.Namespace)
		}
		return nil
	})
	if err == nil && contexts {
		err = db.SpanMemories(func(i store.SpanMemoryInfo) error {
			if strings.HasPrefix(i.Context.String(), prefix) {
				add(i.Namespace)
			}
			return nil
		})
	}
	switch {
	case err != nil:
		return err
	case len(others) == 0:
		return fmt.Errorf("%w: no %s %s in namespace %q, nor in any other", store.ErrNotFound, kind, arg, ns)
	}
	sort.Strings(others)
	return fmt.Errorf("%w: no %s %s in namespace %q (--ns); it is in namespace %s", store.ErrNotFound, kind, arg, ns, strings.Join(others, ", "))
}
