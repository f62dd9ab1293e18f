//go:build darwin || freebsd || linux || netbsd

package cuda

import "github.com/ebitengine/purego"

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func dlclose(h uintptr) { _ = purego.Dlclose(h) }

func register(fn any, addr uintptr) { purego.RegisterFunc(fn, addr) }
