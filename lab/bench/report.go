package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything one Run measured, on one machine.
type Report struct {
	Started   time.Time `json:"started"`
	GoVersion string    `json:"go_version"`
	OSArch    string    `json:"os_arch"`
	CPUs      int       `json:"cpus"`
	Dir       string    `json:"dir"`
	FSType    string    `json:"fs_type"`
	Runs      int       `json:"runs"`
	Cases     []*Case   `json:"cases"`
}

// Case is one (shape, tokens) pair, every store measured on the same bytes.
type Case struct {
	Shape       string `json:"shape"`
	Tokens      int    `json:"tokens"`
	PacketBytes int64  `json:"packet_bytes"`
	// AssembleSkipped says why Assemble was not measured, when it was not.
	AssembleSkipped string `json:"assemble_skipped,omitempty"`
	Rows            []*Row `json:"rows"`

	shape Shape // for the TTFT model; Shape names it in JSON
}

// Row is one store's figures on one case. A nil Stat was not measured.
type Row struct {
	Store string `json:"store"`
	// Put times a synced Put and the background work it leaves (Settle);
	// PutCall the Put call alone.
	Put     *Stat `json:"put,omitempty"`
	PutCall *Stat `json:"put_call,omitempty"`
	GetWarm *Stat `json:"get_warm,omitempty"`
	GetCold *Stat `json:"get_cold,omitempty"`
	// Assemble reads several packets as one request; AssembleWhat says
	// what exactly was timed.
	Assemble     *Stat  `json:"assemble,omitempty"`
	AssembleWhat string `json:"assemble_what,omitempty"`
	// ViewsWarm and ViewsCold time a Get that hands out views and touches
	// no payload byte (kvstore only).
	ViewsWarm *Stat `json:"views_warm,omitempty"`
	ViewsCold *Stat `json:"views_cold,omitempty"`
	// PutProfile is where the Put calls' time went, in seconds over every
	// Put, for stores that say (kvstore).
	PutProfile map[string]float64 `json:"put_profile,omitempty"`
	// SettleSeconds is how long the store's background work after the
	// Puts (flushes, compactions) took, in all.
	SettleSeconds float64 `json:"settle_s"`
	// PayloadBytes were Put; WriteAmp is the bytes the process wrote to
	// storage (/proc/self/io write_bytes - cancelled_write_bytes, over the
	// Puts and Settle) per payload byte; DiskBytes the allocated size of
	// the store's files after Settle.
	PayloadBytes int64   `json:"payload_bytes"`
	WriteAmp     float64 `json:"write_amp"`
	DiskBytes    int64   `json:"disk_bytes"`
	// ColdReadRatio is the bytes the cold Gets read from storage per
	// payload byte (/proc/self/io read_bytes): near 1 when they were cold.
	ColdReadRatio float64 `json:"cold_read_ratio"`
	Err           string  `json:"error,omitempty"`
}

func newReport(cfg Config) *Report {
	fs, err := FSType(cfg.Dir)
	if err != nil {
		fs = "unknown"
	}
	return &Report{
		Started: time.Now().UTC(), GoVersion: runtime.Version(),
		OSArch: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		Dir: cfg.Dir, FSType: fs, Runs: cfg.Runs,
	}
}

// setRatios sets every Stat's ratio to the plain-file row of the case.
func (c *Case) setRatios() {
	base := c.row("plain")
	if base == nil {
		return
	}
	for _, r := range c.Rows {
		r.Put.ratioTo(base.Put)
		r.GetWarm.ratioTo(base.GetWarm)
		r.GetCold.ratioTo(base.GetCold)
		r.Assemble.ratioTo(base.Assemble)
	}
}

func (c *Case) row(store string) *Row {
	for _, r := range c.Rows {
		if r.Store == store && r.Err == "" {
			return r
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as one aligned table per case: MB/s with the
// ratio to plain files, write amplification and on-disk size over payload.
func (r *Report) WriteTable(w io.Writer) error {
	host, _ := os.Hostname()
	fmt.Fprintf(w, "%s, %s, %d CPUs, %s on %s (%s), median of %d runs, MB = 10^6 bytes\n",
		host, r.OSArch, r.CPUs, r.GoVersion, r.Dir, r.FSType, r.Runs)
	for _, c := range r.Cases {
		fmt.Fprintf(w, "\n%s, %d tokens: %.1f MiB per packet\n", c.Shape, c.Tokens, mib(c.PacketBytes))
		if err := c.writeTable(w); err != nil {
			return err
		}
	}
	return nil
}

// writeTable writes the medians, the best runs, then the notes.
func (c *Case) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tput MB/s\tget warm MB/s\tget cold MB/s\tassemble MB/s\twrite amp\tdisk/payload\tcold read\t")
	for _, r := range c.Rows {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\tfailed: %s\t\t\t\t\t\t\t\n", r.Store, firstLine(r.Err))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2fx\t%.2fx\t%.2fx\t\n", r.Store,
			r.Put.cell(), r.GetWarm.cell(), r.GetCold.cell(), r.Assemble.cell(),
			r.WriteAmp, float64(r.DiskBytes)/float64(max(r.PayloadBytes, 1)), r.ColdReadRatio)
	}
	fmt.Fprintln(tw, "best run:\t\t\t\t\t\t\t\t")
	for _, r := range c.Rows {
		if r.Err == "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\t\t\t\n", r.Store,
				r.Put.bestCell(), r.GetWarm.bestCell(), r.GetCold.bestCell(), r.Assemble.bestCell())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c.writeNotes(w)
	return nil
}

func (c *Case) writeNotes(w io.Writer) {
	for _, r := range c.Rows {
		if r.Store != "plain" && r.Err == "" && r.Put != nil && r.Put.PairedRatio > 0 {
			fmt.Fprintf(w, "  %s paired with plain (median of same-round ratios): put %s, get warm %s, get cold %s\n",
				r.Store, r.Put.paired(), r.GetWarm.paired(), r.GetCold.paired())
		}
	}
	if kv, pc := c.row("kvstore"), c.row("plain-chunks"); kv != nil && pc != nil {
		fmt.Fprintf(w, "  kvstore / plain-chunks (same write pattern): put %s, get warm %s, get cold %s\n",
			ratio(kv.Put, pc.Put), ratio(kv.GetWarm, pc.GetWarm), ratio(kv.GetCold, pc.GetCold))
	}
	if c.AssembleSkipped != "" {
		fmt.Fprintf(w, "  assemble not measured: %s\n", c.AssembleSkipped)
	}
	seen := map[string]bool{}
	for _, r := range c.Rows {
		if r.AssembleWhat != "" && !seen[r.AssembleWhat] {
			seen[r.AssembleWhat] = true
			fmt.Fprintf(w, "  assemble (%s): %s\n", strings.Join(c.storesAssembling(r.AssembleWhat), ", "), r.AssembleWhat)
		}
		if r.SettleSeconds >= 0.01 && r.PutCall != nil {
			fmt.Fprintf(w, "  %s: the Put call alone returns at %.0f MB/s; the flushes and compactions it leaves (%.2f s in all) are in put MB/s\n",
				r.Store, r.PutCall.MBps, r.SettleSeconds)
		}
		if len(r.PutProfile) > 0 {
			fmt.Fprintf(w, "  %s put time: %s\n", r.Store, profileShares(r.PutProfile))
		}
		if r.ViewsWarm != nil || r.ViewsCold != nil {
			fmt.Fprintf(w, "  %s views only (no payload byte touched): get warm %s, get cold %s\n",
				r.Store, r.ViewsWarm.latency(), r.ViewsCold.latency())
		}
	}
}

func (c *Case) storesAssembling(what string) []string {
	var out []string
	for _, r := range c.Rows {
		if r.AssembleWhat == what {
			out = append(out, r.Store)
		}
	}
	return out
}

// cell is "MB/s (ratio)", or "-" when not measured.
func (s *Stat) cell() string {
	switch {
	case s == nil:
		return "-"
	case s.Ratio == 0:
		return fmt.Sprintf("%.0f", s.MBps)
	}
	return fmt.Sprintf("%.0f (%.2fx)", s.MBps, s.Ratio)
}

// profileShares is "name 40%, other 60%", largest first.
func profileShares(p map[string]float64) string {
	var total float64
	names := make([]string, 0, len(p))
	for k, v := range p {
		total += v
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return p[names[i]] > p[names[j]] })
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.0f%%", k, 100*p[k]/max(total, 1e-12))
	}
	return strings.Join(parts, ", ")
}

// ratio is a's MB/s over b's, "-" when either is missing.
func ratio(a, b *Stat) string {
	if a == nil || b == nil || b.MBps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a.MBps/b.MBps)
}

// paired is "0.97x", or "-" when there is no paired ratio.
func (s *Stat) paired() string {
	if s == nil || s.PairedRatio == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", s.PairedRatio)
}

// bestCell is cell for the fastest run.
func (s *Stat) bestCell() string {
	if s == nil {
		return "-"
	}
	return (&Stat{MBps: s.BestMBps, Ratio: s.BestRatio}).cell()
}

func (s *Stat) latency() string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f ms", float64(s.Median.Nanoseconds())/1e6)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
