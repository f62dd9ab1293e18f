//go:build !(darwin || freebsd || linux || netbsd)

package cuda

import "errors"

var errNoDlopen = errors.New("no dynamic loader on this operating system")

func dlopen(string) (uintptr, error) { return 0, errNoDlopen }

func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }

func dlclose(uintptr) {}

func register(any, uintptr) {}
