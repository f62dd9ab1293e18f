package store

import "github.com/kvstore/kvstore/store/internal/catalog"

// openCatalog opens the catalog in dir with o's settings.
func openCatalog(dir string, o *Options) (*catalog.Catalog, error) {
	return catalog.Open(dir, &catalog.Options{FS: o.FS, CacheSize: o.CatalogCacheSize,
		MemTableSize: o.CatalogMemTableSize, ReadOnly: o.ReadOnly, Logger: o.Logger})
}
