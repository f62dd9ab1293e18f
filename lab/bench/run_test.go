package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestRunAllStores runs the whole harness once on a tiny shape: every store
// must fill its row (its reads are compared byte for byte inside Run), and
// the table and JSON must carry the figures.
func TestRunAllStores(t *testing.T) {
	cfg := Config{
		Dir: t.TempDir(), Shapes: []Shape{tiny}, Tokens: []int{8}, Runs: 1,
		Stores: StoreNames(), AssembleN: 3, Seed: 1,
	}
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 1 || len(rep.Cases[0].Rows) != len(StoreNames()) {
		t.Fatalf("got %d cases, want 1 with %d rows", len(rep.Cases), len(StoreNames()))
	}
	c := rep.Cases[0]
	for _, r := range c.Rows {
		if r.Put == nil || r.GetWarm == nil || r.GetCold == nil || r.Assemble == nil {
			t.Fatalf("%s: row not filled: %+v", r.Store, r)
		}
		if r.PayloadBytes != 3*c.PacketBytes || r.Put.Runs != 3 {
			t.Fatalf("%s: %d payload bytes in %d puts, want 3 packets", r.Store, r.PayloadBytes, r.Put.Runs)
		}
		if r.DiskBytes <= 0 {
			t.Fatalf("%s: no disk usage measured", r.Store)
		}
	}
	if kv := c.row("kvstore"); kv == nil || kv.PutProfile["blob fdatasync"] <= 0 {
		t.Fatalf("kvstore row has no put profile: %+v", kv)
	}
	if p := c.row("plain"); p == nil || p.Put.Ratio != 1 || p.GetCold.Ratio != 1 {
		t.Fatalf("plain row's ratio to itself is not 1: %+v", p)
	}
	var tbl bytes.Buffer
	if err := rep.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	for _, s := range append(StoreNames(), "tiny, 8 tokens", "assemble", "kvstore / plain-chunks", "views only") {
		if !strings.Contains(tbl.String(), s) {
			t.Fatalf("table lacks %q:\n%s", s, tbl.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Cases) != 1 || back.Cases[0].Rows[0].Put.MBps <= 0 {
		t.Fatalf("JSON does not round trip: %v", err)
	}
}

func TestRunAssembleLimit(t *testing.T) {
	cfg := Config{
		Dir: t.TempDir(), Shapes: []Shape{tiny}, Tokens: []int{4}, Runs: 1,
		Stores: []string{"plain"}, AssembleN: 4, AssembleMaxBytes: 3 * tiny.PacketBytes(4),
	}
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cases[0]
	if c.AssembleSkipped == "" || c.Rows[0].Assemble != nil {
		t.Fatalf("assemble of 4 packets over a 3-packet limit was not skipped: %+v", c)
	}
	if c.Rows[0].PayloadBytes != c.PacketBytes {
		t.Fatalf("with assemble skipped, 1 run should put 1 packet, put %d bytes", c.Rows[0].PayloadBytes)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Dir: t.TempDir(), Shapes: []Shape{tiny}, Tokens: []int{4}, Runs: 1, Stores: []string{"plain"}}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"missing dir", func(c *Config) { c.Dir += "/nope" }},
		{"zero runs", func(c *Config) { c.Runs = 0 }},
		{"zero tokens", func(c *Config) { c.Tokens = []int{0} }},
		{"unknown store", func(c *Config) { c.Stores = []string{"rocksdb"} }},
		{"no shapes", func(c *Config) { c.Shapes = nil }},
		{"negative assemble", func(c *Config) { c.AssembleN = -1 }},
	} {
		c := ok
		tc.mut(&c)
		if _, err := Run(c); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: Run error %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

func TestParseStores(t *testing.T) {
	got, err := ParseStores("bbolt,plain,bbolt")
	if err != nil || strings.Join(got, ",") != "plain,bbolt" {
		t.Fatalf("ParseStores = %v, %v; want report order without duplicates", got, err)
	}
	if _, err := ParseStores("plain,leveldb"); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("unknown store: error %v", err)
	}
}
