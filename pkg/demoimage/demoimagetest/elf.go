// Package demoimagetest makes programs for the tests of what demoimage refuses.
package demoimagetest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// DynamicELF returns a minimal x86-64 ELF executable whose one program header is a
// PT_INTERP naming interp (e.g. "/lib64/ld-linux-x86-64.so.2"): what a dynamically linked
// program looks like to demoimage.CheckStatic, on any machine, without a C toolchain or
// the host's own dynamically linked binaries. It does not run.
func DynamicELF(interp string) []byte {
	const ehsize, phsize = 64, 56
	path := append([]byte(interp), 0)
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: ehsize, Ehsize: ehsize, Phentsize: phsize, Phnum: 1, Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	prog := elf.Prog64{
		Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Off: ehsize + phsize,
		Filesz: uint64(len(path)), Memsz: uint64(len(path)), Align: 1,
	}
	_ = binary.Write(&b, binary.LittleEndian, hdr)
	_ = binary.Write(&b, binary.LittleEndian, prog)
	b.Write(path)
	return b.Bytes()
}
