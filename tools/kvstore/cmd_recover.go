package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/kvstore/kvstore/store"
)

func init() {
	register(&command{name: "recover", summary: "rebuild the catalog of a closed store from its blob files", long: recoverSummary, setup: setupRecover})
}

const recoverSummary = `Rebuilds the catalog of a closed store from its blob files
(store.Recover), for a store Open refuses because its catalog is lost or
damaged (a WAL, MANIFEST, marker or SST that Pebble cannot read, or a
catalog directory removed). The old catalog directory is renamed
catalog.lost-<UTC time> and kept; a new one is built from every whole
extent of every blob file: packets from their put records (format 1.1 and
later), deletes from their tombstones, the latest record of each packet
winning. Span memories, artifacts (adapters included), pins and access
statistics are not rebuilt: the report counts the extents left out. Run
check afterwards. The store must not be open elsewhere (ErrLocked).

First it repairs the store's FORMAT files (FORMAT and FORMAT.copy) if
either is missing or damaged, from the good one or, when neither is good,
from the blob files' headers. --format-only does only that
(store.RecoverFormat) and keeps the catalog: the remedy Open names for a
store whose FORMAT files are both damaged.`

type recoverOutput struct {
	Format     formatOutput `json:"format"`
	MovedAside string       `json:"moved_aside"`
	Scanned    int          `json:"scanned"`
	Inserted   int          `json:"inserted"`
	Replaced   int          `json:"replaced"`
	Deleted    int          `json:"deleted"`
	Repointed  int          `json:"repointed"`
	Stale      int          `json:"stale"`
	NoRecord   int          `json:"without_record"`
	NewFiles   int          `json:"new_files"`
	TornBytes  uint64       `json:"torn_bytes"`
	NextBlob   uint32       `json:"next_blob"`
	GoneFiles  []uint32     `json:"gone_files"`
	Problems   []string     `json:"problems"`
}

// formatOutput is what recover did to the FORMAT files (store.FormatReport).
type formatOutput struct {
	Version     string   `json:"version"`
	Found       []string `json:"found"`
	Rewritten   bool     `json:"rewritten"`
	FromBlobs   bool     `json:"from_blob_headers"`
	BlobHeaders int      `json:"blob_headers"`
}

func formatOf(r *store.FormatReport) formatOutput {
	found := r.Found
	if found == nil {
		found = []string{}
	}
	return formatOutput{Version: r.Version.String(), Found: found, Rewritten: r.Rewritten, FromBlobs: r.FromBlobs, BlobHeaders: r.BlobHeaders}
}

func (o *formatOutput) text(w io.Writer) error {
	for _, f := range o.Found {
		fmt.Fprintf(w, "found %s\n", f)
	}
	switch {
	case o.Rewritten && o.FromBlobs:
		_, err := fmt.Fprintf(w, "wrote FORMAT and FORMAT.copy: format %s, from %d blob file headers\n", o.Version, o.BlobHeaders)
		return err
	case o.Rewritten:
		_, err := fmt.Fprintf(w, "wrote FORMAT and FORMAT.copy: format %s\n", o.Version)
		return err
	}
	_, err := fmt.Fprintf(w, "FORMAT: format %s, good\n", o.Version)
	return err
}

func setupRecover(fs *pflag.FlagSet, e *env) verbFunc {
	formatOnly := fs.Bool("format-only", false, "only repair the FORMAT files; keep the catalog")
	return func(ctx context.Context, e *env, args []string) error { return runRecover(ctx, e, args, *formatOnly) }
}

func runRecover(ctx context.Context, e *env, args []string, formatOnly bool) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if e.dir == "" {
		return fmt.Errorf("%w: --dir is required", errUsage)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if formatOnly {
		rep, err := store.RecoverFormat(e.dir, &store.Options{LockWait: e.lockWait, Logger: warnLogger(e.stderr)})
		if err != nil {
			return err
		}
		out := formatOf(rep)
		return output(e, &out, out.text)
	}
	p := newProgress(e, "recover")
	p.stage("rebuilding the catalog from the blob files")
	rep, err := store.Recover(e.dir, &store.Options{LockWait: e.lockWait, Logger: warnLogger(e.stderr)})
	p.done()
	if err != nil {
		return err
	}
	out := &recoverOutput{Format: formatOf(&rep.Format), MovedAside: rep.MovedAside, Scanned: rep.Scanned, Inserted: rep.Inserted, Replaced: rep.Replaced,
		Deleted: rep.Deleted, Repointed: rep.Repointed, Stale: rep.Stale, NoRecord: rep.NoRecord, NewFiles: rep.NewFiles,
		TornBytes: rep.TornBytes, NextBlob: rep.NextBlob, GoneFiles: nonNil(rep.GoneFiles), Problems: rep.Problems}
	if out.Problems == nil {
		out.Problems = []string{}
	}
	return output(e, out, out.text)
}

func (o *recoverOutput) text(w io.Writer) error {
	if err := o.Format.text(w); err != nil {
		return err
	}
	if o.MovedAside != "" {
		fmt.Fprintf(w, "moved the old catalog to %s (kept)\n", o.MovedAside)
	}
	fmt.Fprintf(w, "scanned %d extents: %d packets inserted, %d replaced, %d deleted by tombstones, %d repointed, %d stale records\n",
		o.Scanned, o.Inserted, o.Replaced, o.Deleted, o.Repointed, o.Stale)
	fmt.Fprintf(w, "%d extents without a record (span memories, artifacts, format 1.0 packets: not rebuilt), %d new blob files, %d torn bytes; next blob file %06d\n",
		o.NoRecord, o.NewFiles, o.TornBytes, o.NextBlob)
	for _, p := range o.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if len(o.GoneFiles) > 0 {
		fmt.Fprintf(w, "warning: %d blob files were removed by compaction or gc (%06d...): tombstones they held are gone, so packets deleted before then may be back\n",
			len(o.GoneFiles), o.GoneFiles[0])
	}
	_, err := fmt.Fprintln(w, "run check next")
	return err
}
