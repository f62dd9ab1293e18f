package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// modulePath is stripped from the "pkg:" lines of bench output, so that a
// row's metric names the package as a path in the repository ("store",
// "internal/crc32c"; "." for the root).
const modulePath = "github.com/kvstore/kvstore"

// errBench wraps problems with bench output.
var errBench = errors.New("bad bench output")

// Samples holds every value of every metric in some bench output, by
// "pkg:BenchmarkName:unit" with the name as printed (GOMAXPROCS suffix kept).
type Samples map[string][]float64

// ParseBench reads `go test -bench` output: "pkg:" lines name the package
// of the Benchmark lines after them; each Benchmark line is the name, the
// iteration count, then value and unit pairs.
func ParseBench(r io.Reader, s Samples) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	pkg := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = relPackage(strings.TrimSpace(p))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue // not a result line ("BenchmarkX" alone, a log line)
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		if pkg == "" {
			return fmt.Errorf("%w: line %d: a result before any pkg: line", errBench, n)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("%w: line %d: value %q of %s", errBench, n, f[i], f[i+1])
			}
			key := pkg + ":" + f[0] + ":" + f[i+1]
			s[key] = append(s[key], v)
		}
	}
	return sc.Err()
}

// relPackage turns an import path into a path in the repository.
func relPackage(p string) string {
	if p == modulePath {
		return "."
	}
	return strings.TrimPrefix(p, modulePath+"/")
}

// Lookup returns the values of metric "pkg:Name:unit", matching a printed
// name that is Name itself or Name with a "-GOMAXPROCS" suffix.
func (s Samples) Lookup(metric string) []float64 {
	pkg, rest, _ := strings.Cut(metric, ":")
	i := strings.LastIndex(rest, ":")
	name, unit := rest[:i], rest[i+1:]
	var vals []float64
	for key, v := range s {
		kp, krest, _ := strings.Cut(key, ":")
		j := strings.LastIndex(krest, ":")
		kname, kunit := krest[:j], krest[j+1:]
		if kp != pkg || kunit != unit {
			continue
		}
		if kname == name || procsSuffix(kname, name) {
			vals = append(vals, v...)
		}
	}
	slices.Sort(vals)
	return vals
}

// procsSuffix reports whether printed is name followed by "-N", the
// GOMAXPROCS suffix go test adds when it is not 1.
func procsSuffix(printed, name string) bool {
	rest, ok := strings.CutPrefix(printed, name+"-")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil && rest[0] != '-' && rest[0] != '+'
}

// Update rewrites the rows whose metric has samples: the figure becomes the
// median, the range and the number of runs; the status is read from the
// goal; date and commit are the given ones. It returns how many rows it
// updated.
func Update(rows []Row, s Samples, date, commit string) (int, error) {
	n := 0
	for i := range rows {
		r := &rows[i]
		if r.Metric == "" {
			continue
		}
		vals := s.Lookup(r.Metric)
		if len(vals) == 0 {
			continue
		}
		med := median(vals)
		unit := r.Metric[strings.LastIndex(r.Metric, ":")+1:]
		r.Figure = figure(vals, med, unit)
		if r.Goal != "" {
			op, bound, err := parseGoal(r.Goal)
			if err != nil {
				return n, fmt.Errorf("%s: %w", r.Benchmark, err)
			}
			met := (op == ">=" && med >= bound) || (op == "<=" && med <= bound)
			r.Status = "not met (median)"
			if met {
				r.Status = "met (median)"
			}
		}
		r.Date, r.Commit = date, commit
		n++
	}
	return n, nil
}

// figure formats sorted values of one unit: "**median 1.02x plain** (0.97-1.15, 5 runs)".
func figure(vals []float64, med float64, unit string) string {
	if len(vals) == 1 {
		return fmt.Sprintf("**%s** (1 run)", withUnit(num(med), unit))
	}
	return fmt.Sprintf("**median %s** (%s-%s, %d runs)", withUnit(num(med), unit), num(vals[0]), num(vals[len(vals)-1]), len(vals))
}

// withUnit puts a value and its unit together: ratios ("x-plain",
// "x_memcpy", "speedup") read as "1.02x plain", others as "3.4 GB/s".
func withUnit(v, unit string) string {
	switch {
	case unit == "speedup":
		return v + "x"
	case strings.HasPrefix(unit, "x-"), strings.HasPrefix(unit, "x_"):
		return v + "x " + strings.ReplaceAll(unit[2:], "_", " ")
	}
	return v + " " + unit
}

// num prints a value to about three significant digits.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// median of sorted values.
func median(v []float64) float64 {
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// checkProvenance requires the date and commit that updated rows get.
func checkProvenance(date, commit string) error {
	if date == "" || commit == "" {
		return errors.New("bench output needs -date and -commit (the code it measured)")
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return fmt.Errorf("-date %q is not YYYY-MM-DD", date)
	}
	if !hexCommit.MatchString(commit) {
		return fmt.Errorf("-commit %q is not 7-40 lower-case hex digits", commit)
	}
	return nil
}

// updateFromFiles parses each bench output file and updates the rows; a
// run that updates no row is an error (the wrong file, or no metric names
// its benchmarks).
func updateFromFiles(rows []Row, files []string, date, commit string, stderr io.Writer) ([]Row, error) {
	s := Samples{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = ParseBench(f, s)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	rows = slices.Clone(rows)
	n, err := Update(rows, s, date, commit)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no row's metric is in %s", errBench, strings.Join(files, ", "))
	}
	fmt.Fprintf(stderr, "benchtable: updated %d rows\n", n)
	return rows, nil
}
