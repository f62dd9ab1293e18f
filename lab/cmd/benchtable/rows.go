package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Row is one benchmark figure, one line of docs/benchmarks.tsv.
type Row struct {
	Area      string // the table it is printed in, in order of first appearance
	Benchmark string // its name in the table
	Command   string // the command that makes the figure
	Compared  string // what is measured against what
	Figure    string // the figure, Markdown
	Target    string // the speed asked for; empty: none
	Status    string // "met ..." or "not met ..." when there is a target
	Date      string // when it was measured, YYYY-MM-DD
	Commit    string // the commit whose code it measures, 7-40 hex digits
	Metric    string // optional: "pkg:BenchmarkName[/sub]:unit" that updates it
	Goal      string // optional, with Metric: ">=N" or "<=N" on the median
}

// columns is the TSV header line, in Row's field order.
var columns = []string{"area", "benchmark", "command", "compared", "figure", "target", "status", "date", "commit", "metric", "goal"}

// errRow wraps every problem found in the rows.
var errRow = errors.New("bad row")

var (
	hexCommit = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	metricRe  = regexp.MustCompile(`^[a-z0-9_./-]+:Benchmark[^:\s]*:[^:\s]+$`)
)

// fields lists a row's values in column order.
func (r *Row) fields() []*string {
	return []*string{&r.Area, &r.Benchmark, &r.Command, &r.Compared, &r.Figure, &r.Target, &r.Status, &r.Date, &r.Commit, &r.Metric, &r.Goal}
}

// ReadRows parses the TSV: the header line, then one row per non-empty
// line, each with exactly one field per column.
func ReadRows(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var rows []Row
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != strings.Join(columns, "\t") {
				return nil, fmt.Errorf("%w: line 1 is not the header %q", errRow, strings.Join(columns, "\\t"))
			}
			continue
		}
		if text == "" {
			continue
		}
		vals := strings.Split(text, "\t")
		if len(vals) != len(columns) {
			return nil, fmt.Errorf("%w: line %d has %d fields, want %d", errRow, line, len(vals), len(columns))
		}
		var row Row
		for i, p := range row.fields() {
			*p = vals[i]
		}
		if err := row.check(); err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", line, row.Benchmark, err)
		}
		key := row.Area + "\x00" + row.Benchmark
		if prev, ok := seen[key]; ok {
			return nil, fmt.Errorf("%w: line %d repeats %q of line %d", errRow, line, row.Benchmark, prev)
		}
		seen[key] = line
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: no header line", errRow)
	}
	return rows, nil
}

// check reports what is wrong with one row.
func (r *Row) check() error {
	for i, v := range []string{r.Area, r.Benchmark, r.Command, r.Compared, r.Figure, r.Date, r.Commit} {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%w: empty %s", errRow, []string{"area", "benchmark", "command", "compared", "figure", "date", "commit"}[i])
		}
	}
	for i, p := range r.fields() {
		if *p != strings.TrimSpace(*p) {
			return fmt.Errorf("%w: %s has leading or trailing space", errRow, columns[i])
		}
		if strings.Contains(*p, `\|`) {
			return fmt.Errorf("%w: %s holds \\|: write a plain | (the table escapes it)", errRow, columns[i])
		}
	}
	if _, err := time.Parse(time.DateOnly, r.Date); err != nil {
		return fmt.Errorf("%w: date %q is not YYYY-MM-DD", errRow, r.Date)
	}
	if !hexCommit.MatchString(r.Commit) {
		return fmt.Errorf("%w: commit %q is not 7-40 lower-case hex digits", errRow, r.Commit)
	}
	if r.Target == "" && r.Status != "" {
		return fmt.Errorf("%w: status %q without a target", errRow, r.Status)
	}
	if r.Target != "" && !strings.HasPrefix(r.Status, "met") && !strings.HasPrefix(r.Status, "not met") {
		return fmt.Errorf("%w: status %q does not start with \"met\" or \"not met\"", errRow, r.Status)
	}
	if r.Metric != "" && !metricRe.MatchString(r.Metric) {
		return fmt.Errorf("%w: metric %q is not pkg:BenchmarkName:unit", errRow, r.Metric)
	}
	if r.Goal != "" {
		if r.Metric == "" {
			return fmt.Errorf("%w: goal %q without a metric", errRow, r.Goal)
		}
		if r.Target == "" {
			return fmt.Errorf("%w: goal %q without a target", errRow, r.Goal)
		}
		if _, _, err := parseGoal(r.Goal); err != nil {
			return err
		}
	}
	return nil
}

// parseGoal splits ">=0.95" into its comparison and bound.
func parseGoal(goal string) (op string, bound float64, err error) {
	for _, op := range []string{">=", "<="} {
		if rest, ok := strings.CutPrefix(goal, op); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				break
			}
			return op, v, nil
		}
	}
	return "", 0, fmt.Errorf("%w: goal %q is not >=N or <=N", errRow, goal)
}

// WriteRows writes rows as ReadRows reads them.
func WriteRows(w io.Writer, rows []Row) error {
	var b bytes.Buffer
	b.WriteString(strings.Join(columns, "\t"))
	b.WriteByte('\n')
	for i := range rows {
		vals := make([]string, 0, len(columns))
		for _, p := range rows[i].fields() {
			if strings.ContainsAny(*p, "\t\n\r") {
				return fmt.Errorf("%w: %s: a field holds a tab or a line break", errRow, rows[i].Benchmark)
			}
			vals = append(vals, *p)
		}
		b.WriteString(strings.Join(vals, "\t"))
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// readRowsFile reads the rows of the named TSV file.
func readRowsFile(name string) ([]Row, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := ReadRows(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}

// writeRowsFile replaces the named TSV file with rows.
func writeRowsFile(name string, rows []Row) error {
	var b bytes.Buffer
	if err := WriteRows(&b, rows); err != nil {
		return err
	}
	return os.WriteFile(name, b.Bytes(), 0o644)
}
