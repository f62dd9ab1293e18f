package store

import "github.com/kvstore/kvstore/store/internal/artifact"

// Artifacts calls fn with the description of every stored artifact, of
// every model, in (model fingerprint, name) order, stopping at the first
// error fn returns, which it returns; ListArtifacts lists one model's
// names. A record failing its CRC, or an index entry without its record,
// stops the walk with ErrCorruption. It is meant for tools (kvstore
// adapter ls).
func (db *DB) Artifacts(fn func(ArtifactInfo) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return artifact.Each(db.cat, func(i artifact.Info) error { return fn(fromArtifactInfo(i)) })
}
