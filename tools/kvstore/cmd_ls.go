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
fingerprint and creation time. --ns and --model filter; --limit stops after
so many rows.`

// lsOutput is ls's output: the admin handler's /ls.
type lsOutput admin.List

// lsFlags are ls's flags.
type lsFlags struct {
	ns, model string
	limit     int
	contexts  bool
}

func setupLs(fs *pflag.FlagSet, e *env) verbFunc {
	var f lsFlags
	fs.StringVar(&f.ns, "ns", "", "only this namespace")
	fs.StringVar(&f.model, "model", "", "only this model (fingerprint hex prefix)")
	fs.IntVar(&f.limit, "limit", 0, "print at most this many rows (0: all)")
	fs.BoolVar(&f.contexts, "contexts", false, "list span memory contexts instead of packets")
	addrFlag(fs, e)
	return func(ctx context.Context, e *env, args []string) error { return runLs(ctx, e, args, f) }
}

func runLs(ctx context.Context, e *env, args []string, f lsFlags) error {
	ns, model, limit, contexts := &f.ns, &f.model, &f.limit, &f.contexts
	if err := noArgs(args); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, *limit)
	}
	if r, err := remote(e); err != nil {
		return err
	} else if r {
		if *contexts {
			return fmt.Errorf("%w: ls --contexts: the admin handler does not list contexts; use --dir", errUsage)
		}
		out := new(lsOutput)
		q := url.Values{"ns": {*ns}, "model": {*model}}
		if *limit > 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		if err := fetch(ctx, e, "/ls", q, out); err != nil {
			return err
		}
		return output(e, out, out.table)
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if *contexts {
		return lsContexts(e, db, *ns, *model, *limit)
	}
	l, err := admin.ListOf(db, admin.ListOptions{Namespace: *ns, Model: *model, Limit: *limit})
	if err != nil {
		return err
	}
	out := (*lsOutput)(l)
	return output(e, out, out.table)
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
		fmt.Fprintln(w, "(more: raise --limit)")
	}
	return nil
}

// lsContext is one span memory context in ls --contexts' output.
type lsContext struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Tokens    int       `json:"tokens"`
	Spans     int       `json:"spans"`
	Factored  int       `json:"factored_spans"`
	Anchors   int       `json:"anchors"`
	Bytes     uint64    `json:"bytes"`
	Created   time.Time `json:"created"`
}

type lsContextsOutput struct {
	Contexts []lsContext `json:"contexts"`
	More     bool        `json:"more"` // --limit cut the list short
}

// lsContexts lists the span memories of namespace ns (all when "") whose
// model starts with the hex prefix model, at most limit (0: all).
func lsContexts(e *env, db *store.DB, ns, model string, limit int) error {
	out := lsContextsOutput{Contexts: []lsContext{}}
	err := db.SpanMemories(func(i store.SpanMemoryInfo) error {
		if (ns != "" && i.Namespace != ns) || !strings.HasPrefix(i.Model.String(), strings.ToLower(model)) {
			return nil
		}
		if limit > 0 && len(out.Contexts) == limit {
			out.More = true
			return errStop
		}
		out.Contexts = append(out.Contexts, lsContext{ID: i.Context.String(), Namespace: i.Namespace, Name: i.Name,
			Model: i.Model.String(), Tokens: i.Tokens, Spans: i.Spans, Factored: i.Factored, Anchors: i.Anchors,
			Bytes: i.ExtentLength, Created: i.Created})
		return nil
	})
	if err != nil && err != errStop {
		return err
	}
	return output(e, out, out.table)
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
		fmt.Fprintln(w, "(more: raise --limit)")
	}
	return nil
}
