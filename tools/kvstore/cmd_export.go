package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/internal/dirsync"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "export", summary: "write a packet to a safetensors file", args: "<packet-id> <file.safetensors>", long: exportSummary, setup: setupExport})
}

const exportSummary = `Writes one packet as a safetensors file in the KV Packet reference
layout: tensor "kv" [2, L, 1, H, S, D] (K then V, in the model's dtype) and
"position_ids" [1, S] int64 (0..S-1: keys are stored at local positions),
with the model spec, fingerprint, namespace, adapter id, adapter token
counts, token ids, base position and packet id in __metadata__ (keys
"kvstore.*", see docs/cli.md). Every chunk is CRC-checked as it is read.
The file is written to a temporary name and renamed when complete. An
existing file is refused unless --force is given; a directory gets the
file <packet id>.safetensors inside it.`

type exportOutput struct {
	ID    string `json:"id"`
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
}

func setupExport(fs *pflag.FlagSet, e *env) verbFunc {
	ns := fs.String("ns", "", "look the id up in this namespace only")
	force := fs.Bool("force", false, "replace the file if it exists")
	return func(ctx context.Context, e *env, args []string) error { return runExport(ctx, e, args, *ns, *force) }
}

// exportTarget is the file export writes for packet id: name, or
// DIR/<id>.safetensors when name is a directory (or ends in a separator).
// An existing file is refused unless force.
func exportTarget(name string, id format.PacketID, force bool) (string, error) {
	st, err := os.Stat(name)
	switch {
	case err == nil && st.IsDir():
		name = filepath.Join(name, id.String()+".safetensors")
	case strings.HasSuffix(name, string(filepath.Separator)) || strings.HasSuffix(name, "/"):
		return "", fmt.Errorf("export into directory %s: %w", name, err)
	}
	st, err = os.Lstat(name)
	switch {
	case err == nil && st.IsDir():
		return "", fmt.Errorf("%w: %s is a directory", store.ErrInvalidArgument, name)
	case err == nil && !force:
		return "", fmt.Errorf("%s: %w (pass --force to replace it)", name, os.ErrExist)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	return name, nil
}

func runExport(ctx context.Context, e *env, args []string, ns string, force bool) error {
	if len(args) != 2 {
		return fmt.Errorf("%w: want a packet id and a file name, got %d arguments", errUsage, len(args))
	}
	if err := checkIDs(args[0]); err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	h, err := findPacket(db, args[0], ns)
	if err != nil {
		return err
	}
	name, err := exportTarget(args[1], h.ID, force)
	if err != nil {
		return err
	}
	p := newProgress(e, "export")
	defer p.done()
	n, err := exportPacket(ctx, db, h, name, force, p)
	if err != nil {
		return err
	}
	p.done()
	out := exportOutput{ID: h.ID.String(), File: name, Bytes: n}
	return output(e, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "exported %s to %s (%d bytes)\n", out.ID, out.File, out.Bytes)
		return err
	})
}

// exportPacket writes packet h to the file name, streaming: one layer's K
// (or V) at a time is copied from the view into a buffer with
// View.CopyChunk, which checks the chunk's CRC in the same pass, and
// written to a temporary file beside name. That file is synced, made 0644,
// renamed into place (without replace, never over a file that appeared
// meanwhile) and the directory synced; on any error, or when ctx is
// cancelled, the temporary file is removed and name is left as it was.
func exportPacket(ctx context.Context, db *store.DB, h *format.PacketHeader, name string, replace bool, p *progress) (int64, error) {
	if h.Pruned() {
		return 0, fmt.Errorf("packet %s is pruned (%d of %d tokens per (layer, head)): only whole packets can be exported",
			h.ID.Short(), h.KeptTokens, h.Tokens)
	}
	m, err := db.Model(h.Model)
	if err != nil {
		return 0, err
	}
	v, err := db.Get(ctx, h.Namespace, h.Model, h.ID)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	for l := range v.Layers() {
		if c := h.Chunks[2*l]; c.Codec != format.CodecRaw || h.Chunks[2*l+1].Codec != format.CodecRaw {
			return 0, fmt.Errorf("packet %s layer %d: codec %v: only raw chunks can be exported", h.ID.Short(), l, c.Codec)
		}
	}
	kv := &safetensors.KV{Model: *m, Namespace: h.Namespace, AdapterID: h.AdapterID,
		HeaderTokens: int(h.HeaderTokens), TrailerTokens: int(h.TrailerTokens), TokenIDs: h.TokenIDs,
		BasePosition: h.BasePosition}
	layers := v.Layers()
	return writeFileAtomic(name, replace, func(w io.Writer) (int64, error) {
		return safetensors.WriteKV(w, kv, func(half, l int, buf []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			i := 2*l + half
			if c, err := v.CopyChunk(buf, i); err != nil {
				return err
			} else if c != len(buf) {
				return fmt.Errorf("%w: packet %s chunk %d: %d bytes, want %d", format.ErrCorruption, h.ID.Short(), i, c, len(buf))
			}
			p.update(int64(half*layers+l+1), int64(2*layers), false)
			return nil
		})
	})
}

// writeFileAtomic writes a file called name with write: to a temporary
// file beside it, synced, made 0644 and renamed into place, and then the
// directory synced, so that a crash leaves either the old file or the
// whole new one. Without replace it is put in place with a hard link,
// which fails on a file that appeared meanwhile (where the file system
// has no hard links, a last check and a rename). The temporary file is
// removed on any error.
func writeFileAtomic(name string, replace bool, write func(io.Writer) (int64, error)) (n int64, err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", name, err)
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if n, err = write(bw); err != nil {
		return 0, err
	}
	if err = bw.Flush(); err != nil {
		return 0, err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return 0, err
	}
	if err = tmp.Sync(); err != nil {
		return 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, err
	}
	if err = place(tmp.Name(), name, replace); err != nil {
		return 0, err
	}
	return n, dirsync.Sync(dir)
}

// place moves the file tmp to name: a rename when replace, else a hard
// link (refused when name exists) and tmp's removal.
func place(tmp, name string, replace bool) error {
	if replace {
		return os.Rename(tmp, name)
	}
	err := os.Link(tmp, name)
	switch {
	case err == nil:
		_ = os.Remove(tmp)
		return nil
	case errors.Is(err, os.ErrExist):
		return fmt.Errorf("%w (pass --force to replace it)", os.ErrExist)
	}
	if _, serr := os.Lstat(name); serr == nil {
		return fmt.Errorf("%w (pass --force to replace it)", os.ErrExist)
	}
	return os.Rename(tmp, name) // no hard links here
}
