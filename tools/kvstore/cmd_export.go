package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
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
The file is written to a temporary name and renamed when complete.`

type exportOutput struct {
	ID    string `json:"id"`
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
}

func setupExport(fs *pflag.FlagSet, e *env) verbFunc {
	ns := fs.String("ns", "", "look the id up in this namespace only")
	return func(ctx context.Context, e *env, args []string) error { return runExport(ctx, e, args, *ns) }
}

func runExport(ctx context.Context, e *env, args []string, ns string) error {
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
	p := newProgress(e, "export")
	defer p.done()
	f, err := exportFile(db, h, p)
	if err != nil {
		return err
	}
	p.stage("writing " + args[1])
	n, err := writeFileAtomic(args[1], f)
	if err != nil {
		return err
	}
	p.done()
	out := exportOutput{ID: h.ID.String(), File: args[1], Bytes: n}
	return output(e, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "exported %s to %s (%d bytes)\n", out.ID, out.File, out.Bytes)
		return err
	})
}

// exportFile reads packet h (every chunk verified) into a safetensors File.
// EncodeKV lays out the "kv" tensor [2, L, 1, H, S, D] from one shared
// zero layer, and each chunk is then copied into its place, K of layer l
// at element [0, l] and V at [1, l], with View.CopyChunk: the chunk's CRC
// is taken in the same pass as that copy, not in a pass of its own.
func exportFile(db *store.DB, h *format.PacketHeader, p *progress) (*safetensors.File, error) {
	if h.Pruned() {
		return nil, fmt.Errorf("packet %s is pruned (%d of %d tokens per (layer, head)): only whole packets can be exported",
			h.ID.Short(), h.KeptTokens, h.Tokens)
	}
	m, err := db.Model(h.Model)
	if err != nil {
		return nil, err
	}
	v, err := db.Get(h.Namespace, h.Model, h.ID)
	if err != nil {
		return nil, err
	}
	defer v.Release()
	for l := range v.Layers() {
		if c := h.Chunks[2*l]; c.Codec != format.CodecRaw || h.Chunks[2*l+1].Codec != format.CodecRaw {
			return nil, fmt.Errorf("packet %s layer %d: codec %v: only raw chunks can be exported", h.ID.Short(), l, c.Codec)
		}
	}
	kv := &safetensors.KV{Model: *m, Namespace: h.Namespace, AdapterID: h.AdapterID,
		HeaderTokens: int(h.HeaderTokens), TrailerTokens: int(h.TrailerTokens), TokenIDs: h.TokenIDs,
		BasePosition: h.BasePosition}
	n := m.KVHeads * kv.Tokens() * m.HeadDim * m.DType.Size() // bytes of one layer's K (or V)
	zero := make([]byte, n)
	for range v.Layers() {
		kv.K, kv.V = append(kv.K, zero), append(kv.V, zero)
	}
	f, err := safetensors.EncodeKV(kv)
	if err != nil {
		return nil, err
	}
	data := f.Tensors[0].Data
	if f.Tensors[0].Name != safetensors.NameKV || len(data) != 2*v.Layers()*n {
		return nil, fmt.Errorf("packet %s: safetensors kv tensor %q of %d bytes, want %d", h.ID.Short(), f.Tensors[0].Name, len(data), 2*v.Layers()*n)
	}
	for l := range v.Layers() {
		for half, i := range []int{2 * l, 2*l + 1} {
			off := (half*v.Layers() + l) * n
			if c, err := v.CopyChunk(data[off:off+n], i); err != nil {
				return nil, err
			} else if c != n {
				return nil, fmt.Errorf("%w: packet %s chunk %d: %d bytes, want %d", format.ErrCorruption, h.ID.Short(), i, c, n)
			}
		}
		p.update(int64(l+1), int64(v.Layers()), false)
	}
	return f, nil
}

// writeFileAtomic writes f to a temporary file beside name, syncs it and
// renames it into place.
func writeFileAtomic(name string, f *safetensors.File) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	n, err := f.WriteTo(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", name, err)
	}
	return n, nil
}
