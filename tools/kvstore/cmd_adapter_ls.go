package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

// adapterLsFlags are adapter ls's flags: --model (with --dtype and
// --weights-id) or --fingerprint choose one model; neither, all.
type adapterLsFlags struct {
	model       adapterModel
	fingerprint string // hex prefix
}

// adapterLsOutput is adapter ls's output.
type adapterLsOutput struct {
	Adapters []adapterLsRow `json:"adapters"`
}

// adapterLsRow is one stored adapter.
type adapterLsRow struct {
	ID         string    `json:"id"`
	Model      string    `json:"model_fingerprint"`
	Header     int       `json:"header_rows"`
	HideHeader bool      `json:"hide_header"`
	Trailer    int       `json:"trailer_rows"`
	Bytes      int       `json:"bytes"`        // its values in float32, as import reports
	Stored     int       `json:"stored_bytes"` // the artifact's data
	Created    time.Time `json:"created"`
}

func setupAdapterLs(fs *pflag.FlagSet, e *env) verbFunc {
	var f adapterLsFlags
	f.model.flags(fs)
	fs.Lookup("model").Usage = "only this llama2.c checkpoint's adapters (with --dtype and --weights-id)"
	fs.StringVar(&f.fingerprint, "fingerprint", "", "only this model's adapters (fingerprint hex prefix)")
	return func(_ context.Context, e *env, args []string) error { return runAdapterLs(e, args, f) }
}

func runAdapterLs(e *env, args []string, f adapterLsFlags) error {
	if err := noArgs(args); err != nil {
		return err
	}
	match, err := f.matcher()
	if err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	out, err := listAdapters(db, match)
	if err != nil {
		return err
	}
	return output(e, out, out.table)
}

// matcher returns whether a model fingerprint is one f asks for.
func (f *adapterLsFlags) matcher() (func(format.Fingerprint) bool, error) {
	prefix := strings.ToLower(f.fingerprint)
	switch {
	case f.model.path != "" && prefix != "":
		return nil, fmt.Errorf("%w: --model and --fingerprint both choose the model: give one", errUsage)
	case len(prefix) > 64 || strings.Trim(prefix, "0123456789abcdef") != "":
		return nil, fmt.Errorf("%w: --fingerprint %q: want up to 64 hex digits", errUsage, f.fingerprint)
	case f.model.path != "":
		_, fp, err := f.model.load()
		if err != nil {
			return nil, err
		}
		return func(m format.Fingerprint) bool { return m == fp }, nil
	}
	return func(m format.Fingerprint) bool { return strings.HasPrefix(m.String(), prefix) }, nil
}

// listAdapters returns the adapters of the models match accepts, in
// (model, id) order, each read and decoded.
func listAdapters(db *store.DB, match func(format.Fingerprint) bool) (*adapterLsOutput, error) {
	var infos []store.ArtifactInfo
	err := db.Artifacts(func(i store.ArtifactInfo) error {
		if strings.HasPrefix(i.Name, store.AdapterArtifact("")) && match(i.Model) {
			infos = append(infos, i)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &adapterLsOutput{Adapters: []adapterLsRow{}}
	for _, i := range infos {
		id := strings.TrimPrefix(i.Name, store.AdapterArtifact(""))
		a, err := adapter.Get(db, i.Model, id)
		if err != nil {
			return nil, err
		}
		out.Adapters = append(out.Adapters, adapterLsRow{ID: id, Model: i.Model.String(), Header: a.HeaderRows(), HideHeader: a.HideHeader,
			Trailer: a.TrailerRows(), Bytes: a.Bytes(), Stored: i.Size, Created: i.CreatedAt})
	}
	return out, nil
}

func (o *adapterLsOutput) table(w io.Writer) error {
	t := newTable(w, "ID", "MODEL", "HEADER", "TRAILER", "STORED", "CREATED")
	for _, a := range o.Adapters {
		header := fmt.Sprint(a.Header)
		if a.HideHeader {
			header += " hidden"
		}
		t.row(a.ID, a.Model[:16], header, a.Trailer, humanBytes(a.Stored), a.Created.Format(time.RFC3339))
	}
	return t.flush()
}
