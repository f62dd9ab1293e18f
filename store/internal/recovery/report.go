package recovery

// Report says what a reconciliation (or rebuild) found in the blob log
// that the catalog did not hold, and what it did about it.
type Report struct {
	Scanned   int // whole extents read past the catalogued ends of the blob files
	Inserted  int // packets re-inserted from their put records
	Replaced  int // catalogued packets a newer put record replaced
	Deleted   int // catalogued (or re-inserted) packets a tombstone deleted
	Stale     int // records older than the catalog's sequence (copies, already applied)
	Repointed int // catalogued packets whose blob file is gone, repointed to a copy compaction made
	NoRecord  int // extents without a record (span memories, artifacts, packets of format 1.0): not rebuilt
	NewFiles  int // blob files the catalog did not list, now catalogued
	TornBytes uint64
	// Problems are records that contradict the catalog or each other; each
	// was left out, and is named here.
	Problems []string
}

// Changed reports whether the catalog needed a change.
func (r *Report) Changed() bool {
	return r.Inserted+r.Replaced+r.Deleted+r.Repointed+r.NewFiles > 0
}
