package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kvstore/kvstore/format"
)

func init() {
	register(&command{name: "ls", summary: "list packets per namespace and model", run: runLs})
}

const lsSummary = `Lists the packets in the store in catalog order (namespace, then id):
short id, namespace, tokens, extent bytes, dtype, layers and short model
fingerprint. --ns and --model filter; --limit stops after so many rows.`

// lsRow is one packet in ls's output.
type lsRow struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	Tokens    uint32 `json:"tokens"`
	Bytes     uint64 `json:"bytes"`
	DType     string `json:"dtype"`
	Layers    uint32 `json:"layers"`
	AdapterID string `json:"adapter_id"`
}

type lsOutput struct {
	Packets []lsRow `json:"packets"`
	More    bool    `json:"more"` // --limit cut the list short
}

func runLs(e *env, args []string) error {
	fs := newFlags(e, "ls", "[flags]", lsSummary)
	storeFlags(fs, e)
	ns := fs.String("ns", "", "only this namespace")
	model := fs.String("model", "", "only this model (fingerprint hex prefix)")
	limit := fs.Int("limit", 0, "print at most this many packets (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, *limit)
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	var out lsOutput
	err = db.Headers(func(h *format.PacketHeader) error {
		if (*ns != "" && h.Namespace != *ns) || !strings.HasPrefix(h.Model.String(), strings.ToLower(*model)) {
			return nil
		}
		if *limit > 0 && len(out.Packets) == *limit {
			out.More = true
			return errStop
		}
		out.Packets = append(out.Packets, lsRow{ID: h.ID.String(), Namespace: h.Namespace, Model: h.Model.String(),
			Tokens: h.Tokens, Bytes: h.ExtentLength, DType: h.DType.String(), Layers: h.Layers, AdapterID: h.AdapterID})
		return nil
	})
	if err != nil && err != errStop {
		return err
	}
	if out.Packets == nil {
		out.Packets = []lsRow{}
	}
	return output(e, out, out.table)
}

func (o *lsOutput) table(w io.Writer) error {
	t := newTable(w, "ID", "NAMESPACE", "TOKENS", "BYTES", "DTYPE", "LAYERS", "MODEL", "ADAPTER")
	for _, p := range o.Packets {
		t.row(p.ID[:16], p.Namespace, p.Tokens, p.Bytes, p.DType, p.Layers, p.Model[:16], p.AdapterID)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if o.More {
		fmt.Fprintln(w, "(more: raise --limit)")
	}
	return nil
}
