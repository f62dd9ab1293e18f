package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...any) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...any) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

// output prints v as JSON with --json, else calls text.
func output(e *env, v any, text func(w io.Writer) error) error {
	if e.json {
		return encodeJSON(e.stdout, v)
	}
	return text(e.stdout)
}

// humanBytes formats n with a binary unit.
func humanBytes[T int64 | uint64 | int](n T) string {
	v := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 || u == "TiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", int64(n))
			}
			return fmt.Sprintf("%.1f %s", v, u)
		}
		v /= 1024
	}
	return ""
}

// encodeJSON writes v as indented JSON.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// outputFindings prints v as output does and then fails, naming how many,
// when there are findings: check and verify exit 1 on any.
func outputFindings(e *env, v any, text func(w io.Writer) error, findings int) error {
	if err := output(e, v, text); err != nil {
		return err
	}
	if findings > 0 {
		return fmt.Errorf("%d findings", findings)
	}
	return nil
}
