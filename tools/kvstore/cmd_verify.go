package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "verify", summary: "check every chunk's CRC32C and every extent trailer", long: verifySummary, setup: setupVerify})
}

const verifySummary = `Reads every catalogued extent (packets and span memories) and checks
each chunk's CRC32C and each extent's trailer (store.Verify). Every bad
chunk is reported with its blob file and offset, packet, layer and K|V.
Exits 1 when anything is found.`

// findingOut is a store.Finding in JSON.
type findingOut struct {
	Kind      string `json:"kind"`
	File      string `json:"file,omitempty"`
	Offset    uint64 `json:"offset"`
	Length    uint64 `json:"length"`
	Namespace string `json:"namespace,omitempty"`
	ID        string `json:"id,omitempty"`
	Context   string `json:"context,omitempty"`
	Layer     int    `json:"layer"`
	Chunk     string `json:"chunk,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Text      string `json:"text"`
}

func findingsOf(fs []store.Finding) []findingOut {
	out := []findingOut{}
	for _, f := range fs {
		o := findingOut{Kind: string(f.Kind), File: f.File, Offset: f.Offset, Length: f.Length, Namespace: f.Namespace,
			Context: f.Context, Layer: f.Layer, Detail: f.Detail, Text: f.String()}
		if f.ID != [32]byte{} {
			o.ID = fmt.Sprintf("%x", f.ID)
		}
		if f.Chunk != 0 {
			o.Chunk = f.Chunk.String()
		}
		out = append(out, o)
	}
	return out
}

type verifyOutput struct {
	Extents   int64        `json:"extents"`
	Chunks    int64        `json:"chunks"`
	Bytes     int64        `json:"bytes"`
	Skipped   int64        `json:"skipped"`
	Truncated bool         `json:"truncated"`
	Findings  []findingOut `json:"findings"`
}

func setupVerify(fs *pflag.FlagSet, e *env) verbFunc {
	max := fs.Int("max-findings", 0, "stop after so many findings (0: no limit)")
	addrFlag(fs, e)
	return func(ctx context.Context, e *env, args []string) error { return runVerify(ctx, e, args, *max) }
}

func runVerify(ctx context.Context, e *env, args []string, max int) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if max < 0 {
		return fmt.Errorf("%w: --max-findings %d is negative", errUsage, max)
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	p := newProgress(e, "verify")
	rep, err := db.Verify(ctx, &store.VerifyOptions{MaxFindings: max},
		func(done, total int64) { p.update(done, total, true) })
	p.done()
	if err != nil {
		return err
	}
	out := verifyOutput{Extents: rep.Extents, Chunks: rep.Chunks, Bytes: rep.Bytes, Skipped: rep.Skipped,
		Truncated: rep.Truncated, Findings: findingsOf(rep.Findings)}
	if err := output(e, out, out.text); err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("%d findings", len(rep.Findings))
	}
	return nil
}

func (o *verifyOutput) text(w io.Writer) error {
	for _, f := range o.Findings {
		fmt.Fprintln(w, f.Text)
	}
	status := "ok"
	if len(o.Findings) > 0 {
		status = fmt.Sprintf("%d findings", len(o.Findings))
		if o.Truncated {
			status += " (stopped at --max-findings)"
		}
	}
	fmt.Fprintf(w, "verified %d extents, %d chunks, %d bytes: %s\n", o.Extents, o.Chunks, o.Bytes, status)
	return nil
}
