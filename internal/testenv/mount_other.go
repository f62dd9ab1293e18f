//go:build !linux

package testenv

import "errors"

var errNoMount = errors.New("mounting a tmpfs is Linux-only")

func mountTmpfs(dir string, size int64) error { return errNoMount }

func unmount(dir string) error { return errNoMount }
