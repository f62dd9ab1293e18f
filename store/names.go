package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// checkNamespace refuses namespaces that do not fit the u16 length prefix
// and the format's name limit.
func checkNamespace(ns string) error {
	if len(ns) > format.MaxNameLen {
		return fmt.Errorf("%w: namespace of %d bytes exceeds %d", ErrInvalidArgument, len(ns), format.MaxNameLen)
	}
	return nil
}

// openCatalog opens the catalog in dir with o's settings.
func openCatalog(dir string, o *Options) (*catalog.Catalog, error) {
	return catalog.Open(dir, &catalog.Options{FS: o.FS, CacheSize: o.CatalogCacheSize,
		MemTableSize: o.CatalogMemTableSize, ReadOnly: o.ReadOnly, Logger: o.Logger})
}
