package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "ls", summary: "list packets (or span memory contexts) per namespace and model", long: lsSummary, setup: setupLs})
}

const lsSummary = `Lists the packets in the store in catalog order (namespace, then id):
short id, namespace, tokens, extent bytes, dtype, layers and short model
fingerprint. With --contexts it lists the span memory contexts instead, in
catalog order (namespace, then name): short context id, namespace, name,
tokens, spans, factored spans, anchors, extent bytes, short model
fingerprint and creation time. --ns and --model (a hex prefix of the
fingerprint) filter; --limit stops after so many rows and prints the
cursor of the next page ("next" in JSON), which --after takes. With --addr
the list comes from a live store's admin handler, which answers at most
1000 rows a page by default.`

// lsOutput is ls's output: the admin handler's /ls.
type lsOutput admin.List

// lsContextsOutput is ls --contexts' output: the admin handler's /contexts.
type lsContextsOutput admin.ContextList

// lsFlags are ls's flags.
type lsFlags struct {
	ns, model, after string
	limit            int
	contexts         bool
}

func setupLs(fs *pflag.FlagSet, e *env) verbFunc {
	var f lsFlags
	fs.StringVar(&f.ns, "ns", "", "only this namespace")
	fs.StringVar(&f.model, "model", "", "only this model (fingerprint hex prefix)")
	fs.IntVar(&f.limit, "limit", 0, "print at most this many rows (0: all)")
	fs.StringVar(&f.after, "after", "", "start after this cursor (the \"next\" of a --limit page)")
	fs.BoolVar(&f.contexts, "contexts", false, "list span memory contexts instead of packets")
	addrFlag(fs, e)
	return func(ctx context.Context, e *env, args []string) error { return runLs(ctx, e, args, f) }
}

func runLs(ctx context.Context, e *env, args []string, f lsFlags) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if f.limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, f.limit)
	}
	o := admin.ListOptions{Namespace: f.ns, Model: f.model, Limit: f.limit, After: f.after}
	if err := o.Check(); err != nil { // --model not hex, a malformed --after
		return fmt.Errorf("%w: --%v", errUsage, strings.TrimPrefix(err.Error(), store.ErrInvalidArgument.Error()+": "))
	}
	q := url.Values{"ns": {f.ns}, "model": {f.model}, "after": {f.after}}
	if f.limit > 0 {
		q.Set("limit", strconv.Itoa(f.limit))
	}
	if f.contexts {
		out, err := report(ctx, e, "/contexts", q, func(db *store.DB) (*lsContextsOutput, error) {
			l, err := admin.ContextsOf(db, o)
			return (*lsContextsOutput)(l), err
		})
		if err != nil {
			return err
		}
		return output(e, out, out.table)
	}
	out, err := report(ctx, e, "/ls", q, func(db *store.DB) (*lsOutput, error) {
		l, err := admin.ListOf(db, o)
		return (*lsOutput)(l), err
	})
	if err != nil {
		return err
	}
	return output(e, out, out.table)
}

// morePage says that --limit cut the list and how to get the rest.
func morePage(w io.Writer, next string) {
	fmt.Fprintf(w, "(more: raise --limit, or continue with --after %s)\n", shellQuote(next))
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./%:=+.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./%:=+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (o *lsOutput) table(w io.Writer) error {
	t := newTable(w, "ID", "NAMESPACE", "TOKENS", "BYTES", "DTYPE", "LAYERS", "MODEL", "ADAPTER")
	for _, p := range o.Packets {
		t.row(p.ID[:16], p.Namespace, p.Tokens, humanBytes(p.Bytes), p.DType, p.Layers, p.Model[:16], p.AdapterID)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if o.More {
		morePage(w, o.Next)
	}
	return nil
}

func (o *lsContextsOutput) table(w io.Writer) error {
	t := newTable(w, "ID", "NAMESPACE", "NAME", "TOKENS", "SPANS", "FACTORED", "ANCHORS", "BYTES", "MODEL", "CREATED")
	for _, c := range o.Contexts {
		t.row(c.ID[:16], c.Namespace, c.Name, c.Tokens, c.Spans, c.Factored, c.Anchors, humanBytes(c.Bytes), c.Model[:16],
			c.Created.Format(time.RFC3339))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if o.More {
		morePage(w, o.Next)
	}
	return nil
}
