/*
 * exe_kind.c: what kind of program an executable is, as far as a preload
 * library cares.  faultline's disk faults, clock offsets and the record of
 * syncs (`unsynced: lose`) work through LD_PRELOAD: they wrap functions of
 * the C library.  They cannot reach a program that is statically linked (the
 * dynamic loader never runs, so LD_PRELOAD is never read) nor a Go program
 * (it makes its system calls itself, and reads the clock through the vDSO,
 * even when it is dynamically linked for cgo).  This file tells them apart
 * by reading the ELF file: no PT_INTERP program header is a static program;
 * a `.go.buildinfo` or `.note.go.buildid` section, or else the build
 * information's magic ("\xff Go buildinf:") in its first 64 MiB, is Go.
 * Anything that is not a 64-bit ELF file (a script, say: its interpreter is
 * what runs) is "other".
 */
#include "harness/sys/exe_kind.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GO_MAGIC "\xff Go buildinf:"
#define SCAN_MAX (64u << 20)

static bool pread_all(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off) == (ssize_t)n;
}

/* The Go build information's magic anywhere in the first SCAN_MAX bytes. */
static bool has_go_magic(int fd)
{
    static char buf[1 << 16];
    size_t m = sizeof GO_MAGIC - 1, keep = 0;
    for (off_t off = 0; off < (off_t)SCAN_MAX;) {
        ssize_t n = pread(fd, buf + keep, sizeof buf - keep, off);
        if (n <= 0)
            return false;
        size_t have = keep + (size_t)n;
        if (memmem(buf, have, GO_MAGIC, m))
            return true;
        keep = have < m - 1 ? have : m - 1;
        memmove(buf, buf + have - keep, keep);
        off += n;
    }
    return false;
}

static bool go_sections(int fd, const Elf64_Ehdr *eh)
{
    if (!eh->e_shoff || !eh->e_shnum || eh->e_shstrndx >= eh->e_shnum ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum > 4096)
        return false;
    Elf64_Shdr *sh = calloc(eh->e_shnum, sizeof *sh);
    char *names = NULL;
    bool go = false;
    if (!sh || !pread_all(fd, sh, eh->e_shnum * sizeof *sh, (off_t)eh->e_shoff))
        goto out;
    const Elf64_Shdr *ns = &sh[eh->e_shstrndx];
    if (ns->sh_size == 0 || ns->sh_size > (1u << 20) || !(names = malloc(ns->sh_size + 1)) ||
        !pread_all(fd, names, ns->sh_size, (off_t)ns->sh_offset))
        goto out;
    names[ns->sh_size] = 0;
    for (size_t i = 0; i < eh->e_shnum && !go; i++)
        if (sh[i].sh_name < ns->sh_size) {
            const char *n = names + sh[i].sh_name;
            go = !strcmp(n, ".go.buildinfo") || !strcmp(n, ".note.go.buildid");
        }
out:
    free(sh);
    free(names);
    return go;
}

enum fl_exe_kind fl_exe_kind_fd(int fd)
{
    Elf64_Ehdr eh;
    if (!pread_all(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 1024)
        return FL_EXE_OTHER;
    Elf64_Phdr ph[1024];
    if (!pread_all(fd, ph, eh.e_phnum * sizeof *ph, (off_t)eh.e_phoff))
        return FL_EXE_OTHER;
    bool interp = false;
    for (size_t i = 0; i < eh.e_phnum; i++)
        interp |= ph[i].p_type == PT_INTERP;
    if (go_sections(fd, &eh) || (!eh.e_shnum && has_go_magic(fd)))
        return FL_EXE_GO;
    return interp ? FL_EXE_DYNAMIC : FL_EXE_STATIC;
}

enum fl_exe_kind fl_exe_kind_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return FL_EXE_OTHER;
    enum fl_exe_kind k = fl_exe_kind_fd(fd);
    close(fd);
    return k;
}

const char *fl_exe_kind_why(enum fl_exe_kind k)
{
    switch (k) {
    case FL_EXE_STATIC:
        return "is statically linked: the dynamic loader never runs in it, so no preload "
               "enters it";
    case FL_EXE_GO:
        return "is a Go binary: it makes its system calls (and reads the clock) itself, not "
               "through the C library, so a preload cannot reach it";
    default: return "";
    }
}
