package main

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var header = strings.Join(columns, "\t") + "\n"

// tsvRow joins fields with tabs.
func tsvRow(f ...string) string { return strings.Join(f, "\t") + "\n" }

func TestRowsRoundTrip(t *testing.T) {
	in := header +
		tsvRow("Store", "Put", "`go test`", "Put vs file", "**1.02x**", ">= 0.95x", "met", "2026-12-02", "a485253", "store:BenchmarkPutPaired:x-plain", ">=0.95") +
		"\n" + // blank lines are skipped
		tsvRow("Store", "Get", "same run", "Get", "119 µs", "", "", "2026-12-01", "4f1b650", "", "")
	rows, err := ReadRows(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"Store", "Put", "`go test`", "Put vs file", "**1.02x**", ">= 0.95x", "met", "2026-12-02", "a485253", "store:BenchmarkPutPaired:x-plain", ">=0.95"},
		{"Store", "Get", "same run", "Get", "119 µs", "", "", "2026-12-01", "4f1b650", "", ""},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("ReadRows = %+v\nwant %+v", rows, want)
	}
	var b bytes.Buffer
	if err := WriteRows(&b, rows); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != strings.Replace(in, "\n\n", "\n", 1) {
		t.Fatalf("WriteRows =\n%s\nwant\n%s", got, in)
	}
}

func TestReadRowsRefuses(t *testing.T) {
	good := []string{"A", "b", "c", "d", "f", "", "", "2026-12-02", "a485253", "", ""}
	with := func(i int, v string) string {
		f := append([]string(nil), good...)
		f[i] = v
		return header + tsvRow(f...)
	}
	for _, tc := range []struct{ name, in string }{
		{"no header", tsvRow(good...)},
		{"empty file", ""},
		{"too few fields", header + tsvRow(good[:10]...)},
		{"too many fields", header + tsvRow(append(good, "x")...)},
		{"empty benchmark", with(1, "")},
		{"empty figure", with(4, "")},
		{"bad date", with(7, "2026-13-02")},
		{"commit not hex", with(8, "HEAD")},
		{"commit too short", with(8, "a4852")},
		{"status without target", with(6, "met")},
		{"leading space", with(3, " d")},
		{"escaped pipe", with(2, "`a\\|b`")},
		{"bad metric", with(9, "store BenchmarkPut x")},
		{"goal without metric", with(10, ">=1")},
		{"a row twice", header + tsvRow(good...) + tsvRow(good...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadRows(strings.NewReader(tc.in)); !errors.Is(err, errRow) {
				t.Fatalf("ReadRows = %v, want errRow", err)
			}
		})
	}
	t.Run("target without a met status", func(t *testing.T) {
		f := append([]string(nil), good...)
		f[5], f[6] = ">= 1x", "reached"
		if _, err := ReadRows(strings.NewReader(header + tsvRow(f...))); !errors.Is(err, errRow) {
			t.Fatalf("ReadRows = %v, want errRow", err)
		}
	})
	t.Run("goal that is not a bound", func(t *testing.T) {
		f := append([]string(nil), good...)
		f[5], f[6], f[9], f[10] = ">= 1x", "met", "store:BenchmarkPut:x-plain", "about 1"
		if _, err := ReadRows(strings.NewReader(header + tsvRow(f...))); !errors.Is(err, errRow) {
			t.Fatalf("ReadRows = %v, want errRow", err)
		}
	})
}

func TestWriteRowsRefusesTabs(t *testing.T) {
	rows := []Row{{Area: "A", Benchmark: "b", Command: "c", Compared: "x\ty", Figure: "f", Date: "2026-12-02", Commit: "a485253"}}
	if err := WriteRows(&bytes.Buffer{}, rows); !errors.Is(err, errRow) {
		t.Fatalf("WriteRows = %v, want errRow", err)
	}
}
