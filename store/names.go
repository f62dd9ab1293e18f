package store

import "github.com/kvstore/kvstore/store/internal/catalog"

// openCatalog opens the catalog in dir with o's settings.
func openCatalog(dir string, o *Options) (*catalog.Catalog, error) {
	return catalog.Open(dir, catalogOpts(o))
}

// openCatalogInMemory opens the existing catalog in dir with o's settings,
// read-write with every write kept in memory (catalog.Options.InMemory).
func openCatalogInMemory(dir string, o *Options) (*catalog.Catalog, error) {
	co := catalogOpts(o)
	co.InMemory = true
	return catalog.Open(dir, co)
}

func catalogOpts(o *Options) *catalog.Options {
	return &catalog.Options{FS: o.FS, CacheSize: o.CatalogCacheSize,
		MemTableSize: o.CatalogMemTableSize, ReadOnly: o.ReadOnly, Logger: o.Logger}
}
