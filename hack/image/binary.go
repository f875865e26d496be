package main

import (
	"debug/elf"
	"fmt"
	"os"
)

// elfMachines maps each supported GOARCH to the ELF machine of its binaries.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkBinary refuses b unless its file is a statically linked 64-bit Linux
// ELF executable for b's architecture: the image is FROM scratch, so there
// is no loader or libc to run anything else.
func checkBinary(b binary) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("--binary %s=%s: "+format, append([]any{b.platform.String(), b.path}, args...)...)
	}
	fi, err := os.Stat(b.path)
	if err != nil {
		return fail("%w", err)
	}
	if !fi.Mode().IsRegular() {
		return fail("not a regular file")
	}
	f, err := elf.Open(b.path)
	if err != nil {
		return fail("not an ELF executable: %w", err)
	}
	defer f.Close()
	if want := elfMachines[b.platform.Architecture]; f.Machine != want {
		return fail("an ELF executable for %s, not %s (%s)", f.Machine, b.platform.Architecture, want)
	}
	if f.Class != elf.ELFCLASS64 {
		return fail("a %s ELF file, want %s", f.Class, elf.ELFCLASS64)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fail("an ELF executable for %s, not Linux", f.OSABI)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fail("an ELF file of type %s, not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fail("dynamically linked; the image has no libc or loader: build it with CGO_ENABLED=0")
		}
	}
	return nil
}
