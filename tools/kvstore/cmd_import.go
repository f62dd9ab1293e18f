package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "import", summary: "store a packet read from a safetensors file", args: "<file.safetensors>", long: importSummary, setup: setupImport})
}

const importSummary = `Reads a safetensors file and stores it as a packet. Accepted: tensor
"kv" [2, L, 1, H, S, D] (K then V), or per-layer "k.{l}" and "v.{l}" of
shape [1, H, S, D] or [H, S, D]; optional "position_ids" [1, S] int64,
consecutive (the keys' positions: keys not at 0 are rotated to 0 as Put
does); dtype equal to the model spec's; no other tensor. __metadata__ must
hold "kvstore.model" (the model spec, JSON) and "kvstore.token_ids" (a
JSON array); the other "kvstore.*" keys are optional and checked when
present (docs/cli.md). The file is validated the way safetensors does
(header cap, offsets sorted and contiguous, lengths equal to shape times
dtype size, checked arithmetic) before its buffer is read. Creates the
store if --dir holds none.`

type importOutput struct {
	ID        string `json:"id"`
	Stored    bool   `json:"already_stored"`
	Tokens    int    `json:"tokens"`
	Namespace string `json:"namespace"`
}

func setupImport(fs *pflag.FlagSet, e *env) verbFunc {
	ns := fs.String("ns", "", "store under this namespace instead of the file's (the id changes with it)")
	return func(ctx context.Context, e *env, args []string) error { return runImport(ctx, e, args, *ns) }
}

func runImport(ctx context.Context, e *env, args []string, ns string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: want one file name, got %d arguments", errUsage, len(args))
	}
	if e.dir == "" {
		return fmt.Errorf("%w: --dir is required", errUsage)
	}
	p := newProgress(e, "import")
	defer p.done()
	p.stage("reading " + args[0])
	pk, release, err := readPacket(args[0])
	if err != nil {
		return err
	}
	defer release()
	if ns != "" {
		pk.Namespace = ns
	}
	db, err := openStore(e, true)
	if err != nil {
		return err
	}
	defer db.Close()
	p.stage("writing the packet")
	id, had := importID(db, pk)
	if _, err := db.Put(ctx, pk); err != nil {
		return err
	}
	p.done()
	out := importOutput{ID: id, Stored: had, Tokens: pk.Tokens(), Namespace: pk.Namespace}
	return output(e, out, func(w io.Writer) error {
		what := "imported"
		if had {
			what = "already stored"
		}
		_, err := fmt.Fprintf(w, "%s %s (%d tokens, namespace %q)\n", what, out.ID, out.Tokens, out.Namespace)
		return err
	})
}

// importID returns the packet's id and whether the store has it already.
func importID(db *store.DB, p *store.Packet) (string, bool) {
	fp := p.Model.Fingerprint()
	id := format.ComputePacketID(p.Namespace, fp, p.AdapterID, p.TokenIDs)
	had, _ := db.Has(context.Background(), p.Namespace, fp, id)
	return id.String(), had
}

// readPacket maps and validates a safetensors file into a store.Packet
// whose layers are slices of the mapping (mapFile): call release once the
// packet is no longer used. The header is validated the way safetensors
// does before any tensor byte is touched.
func readPacket(name string) (_ *store.Packet, release func(), err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case st.IsDir():
		return nil, nil, fmt.Errorf("%w: %s is a directory, not a safetensors file", store.ErrInvalidArgument, name)
	case !st.Mode().IsRegular():
		return nil, nil, fmt.Errorf("%w: %s is not a regular file but a %s", store.ErrInvalidArgument, name, fileKind(st.Mode()))
	}
	if st.Size() < 8 {
		return nil, nil, fmt.Errorf("%s: %w: %d bytes: too short for a safetensors file", name, format.ErrCorruption, st.Size())
	}
	b, unmap, err := mapFile(f, st.Size())
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			unmap()
		}
	}()
	file, err := safetensors.Decode(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	kv, err := safetensors.DecodeKV(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: kv.Namespace, Model: &kv.Model, AdapterID: kv.AdapterID,
		HeaderTokens: kv.HeaderTokens, TrailerTokens: kv.TrailerTokens, TokenIDs: kv.TokenIDs,
		BasePosition: int(kv.KeyPosition)}}
	for l := range kv.K {
		p.Layers = append(p.Layers, store.Layer{K: kv.K[l], V: kv.V[l]})
	}
	return p, unmap, nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
