/*
 * bundle.h: TensorFlow V2 checkpoints ("tensor bundles"), written, read,
 * verified and merged exactly as TensorFlow does it.
 *
 * A bundle with prefix P is the files
 *   P.index                    a LevelDB-style table: key "" -> BundleHeaderProto,
 *                              tensor name -> BundleEntryProto (dtype, shape,
 *                              shard, offset, size, masked crc32c, slices)
 *   P.data-00000-of-0000N ...  raw little-endian tensor bytes
 * (README.md lists what follows TensorFlow exactly).  The writer produces
 * byte-identical files to TensorFlow's BundleWriter for the same tensors
 * added in the same order; the reader accepts everything TensorFlow writes
 * (uncompressed or snappy index blocks) and checks every crc.
 *
 * Errors: every function returns 0 (or a count) on success and a negative
 * errno on failure, and fills the caller's struct ckpt_err (may be NULL) with
 * a message naming the file, the tensor and what is wrong, plus the pieces
 * separately (path, entry, failing call) so that callers can build their own
 * text, e.g. TensorFlow's "NotFoundError: PATH; No such file or directory"
 * (see ckpt_err_tf()).  Corrupt or foreign files give -EBADMSG, a missing
 * file or tensor -ENOENT, a bad argument -EINVAL; system call failures pass
 * their errno through.
 *
 * Thread safety: distinct objects may be used from distinct threads; one
 * writer or reader must not be used by two threads at once.
 */
#ifndef CKPT_BUNDLE_H
#define CKPT_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ---------------------------------------------------------- */

#define CKPT_ERR_PATH_MAX 4096
#define CKPT_ERR_ENTRY_MAX 256
#define CKPT_ERR_MSG_MAX (CKPT_ERR_PATH_MAX + 1024)

struct ckpt_err {
    int code;                       /* negative errno; 0 = no error */
    char call[16];                  /* failing system call ("open", "rename",
                                       ...) or "" for a format/argument error */
    char path[CKPT_ERR_PATH_MAX];   /* the file or directory concerned, or "" */
    char entry[CKPT_ERR_ENTRY_MAX]; /* the tensor concerned (printable), or "" */
    char msg[CKPT_ERR_MSG_MAX];     /* full text: "PATH: tensor 'E': what" */
};

/* TensorFlow's Python error class for an errno ("NotFoundError",
 * "AlreadyExistsError", "PermissionDeniedError", "ResourceExhaustedError",
 * "DataLossError" for -EBADMSG, "InvalidArgumentError", "UnknownError"...). */
const char *ckpt_err_tf_class(int code);
/* TensorFlow-shaped text for e: for a failed system call on a path,
 * "NotFoundError: PATH; No such file or directory" (TensorFlow's POSIX
 * IOError wording); otherwise "<Class>: <msg>".  Returns buf. */
char *ckpt_err_tf(const struct ckpt_err *e, char *buf, size_t len);

/* ---- dtypes and shapes ------------------------------------------------ */

/* Values are TensorFlow's DataType enum (types.proto). */
enum ckpt_dtype {
    CKPT_DT_INVALID = 0,
    CKPT_DT_FLOAT = 1,
    CKPT_DT_DOUBLE = 2,
    CKPT_DT_INT32 = 3,
    CKPT_DT_UINT8 = 4,
    CKPT_DT_INT16 = 5,
    CKPT_DT_INT8 = 6,
    CKPT_DT_STRING = 7,
    CKPT_DT_COMPLEX64 = 8,
    CKPT_DT_INT64 = 9,
    CKPT_DT_BOOL = 10,
    CKPT_DT_BFLOAT16 = 14,
    CKPT_DT_UINT16 = 17,
    CKPT_DT_COMPLEX128 = 18,
    CKPT_DT_HALF = 19,
    CKPT_DT_UINT32 = 22,
    CKPT_DT_UINT64 = 23,
};

/* TensorFlow's name ("float", "double", "int32", "uint8", "string",
 * "int64", "bool", ...) or NULL for a dtype this library does not know. */
const char *ckpt_dtype_name(int dtype);
/* Inverse of ckpt_dtype_name (also accepts "float32", "float64");
 * CKPT_DT_INVALID when unknown. */
int ckpt_dtype_from_name(const char *name);
/* Bytes per element; 0 for string and unknown dtypes. */
size_t ckpt_dtype_size(int dtype);

#define CKPT_MAX_RANK 64

/* Number of elements of a shape (1 for rank 0); -1 if a dimension is
 * negative or the product overflows int64. */
int64_t ckpt_shape_elements(int rank, const int64_t *dims);

/* One extent of a TensorSliceProto: length -1 means "all of this dim". */
struct ckpt_extent {
    int64_t start;
    int64_t length;
};
struct ckpt_slice {
    int nextents;
    const struct ckpt_extent *extents;
};

/* ---- file names (TensorFlow's) --------------------------------------- */

/* All return malloc'd strings (NULL when out of memory). */
char *ckpt_index_name(const char *prefix);                         /* P.index */
char *ckpt_data_name(const char *prefix, int shard, int nshards);  /* P.data-%05d-of-%05d */
char *ckpt_shard_name(const char *prefix, int shard, int nshards); /* P-%05d-of-%05d */
/* "<prefix>_temp_<32 hex>/part", the prefix under which TensorFlow's sharded
 * Saver writes each shard's part bundle before merging.  hex32 is a 32 char
 * lowercase hex string, or NULL for a random one (uuid4().hex style). */
char *ckpt_temp_prefix(const char *prefix, const char *hex32);

/* ---- writer ------------------------------------------------------------ */

/* States: OPEN -> (IN_TENSOR <-> OPEN)* -> finished (freed) | aborted
 * (freed).  Any error makes the writer FAILED: later calls return the same
 * error; finish then removes the temporary files.
 * Files are written under temporary names (final name + ".tempstate<N>", as
 * TensorFlow does) and renamed at finish: the data file first, then the
 * index.  A partial file never appears under a final name. */
struct ckpt_writer;

enum {
    /* Directory creation at open, for dirname(prefix): */
    CKPT_W_MKDIR = 1u << 0,   /* create the last component only, as TensorFlow's
                                 BundleWriter (non-recursive CreateDir) */
    CKPT_W_MKDIR_P = 1u << 1, /* create every missing component */
    /* Index blocks: snappy compressed when that saves >= 1/8 (LevelDB rule).
     * TensorFlow writes them uncompressed; byte identity needs this off. */
    CKPT_W_SNAPPY = 1u << 2,
    /* By default the writer asks the kernel to start writing the data file
     * back every 16 MiB (sync_file_range), so that a CKPT_SYNC finish waits
     * for little; this turns that off. */
    CKPT_W_NO_WRITEBACK = 1u << 3,
    /* The data file is written with O_DIRECT from two aligned buffers, one
     * filling while the other is written asynchronously (Linux AIO): no
     * page-cache copy, and the disk works while the caller produces more.
     * Falls back to the default path where the filesystem refuses O_DIRECT
     * (tmpfs).  The bytes on disk are the same either way. */
    CKPT_W_DIRECT = 1u << 4,
};

struct ckpt_writer_opts {
    unsigned flags;          /* CKPT_W_* */
    size_t block_size;       /* index data block size; 0 = 262144 (TensorFlow) */
    size_t buffer_size;      /* data file write buffer; 0 = 8 MiB */
    unsigned data_alignment; /* pad each tensor's start; 0 or 1 = none (TF default) */
};

/* Opens a writer for one-shard bundle PREFIX (shard 0 of 1). opts NULL =
 * TensorFlow's defaults with CKPT_W_MKDIR. */
int ckpt_writer_open(struct ckpt_writer **wp, const char *prefix,
                     const struct ckpt_writer_opts *opts, struct ckpt_err *err);

/* Streams len bytes of the current tensor (like ckpt_writer_append) that
 * fill() writes straight into the writer's buffer, in spans: fill(ctx, dst,
 * n, &crc) puts n bytes at dst and sets crc to their crc32c (a socket
 * reader that checksums what it receives anyway saves a pass), 0 or a
 * negative errno.  A fill failure is returned as is, err untouched, and
 * leaves the writer failed (abort it). */
typedef int (*ckpt_fill_fn)(void *ctx, void *dst, size_t n, uint32_t *crc);
int ckpt_writer_append_fill(struct ckpt_writer *w, size_t len, ckpt_fill_fn fill, void *ctx,
                            struct ckpt_err *err);

/* True when the writer's data file goes the direct path (CKPT_W_DIRECT was
 * asked for and the filesystem takes O_DIRECT). */
bool ckpt_writer_is_direct(const struct ckpt_writer *w);

/* Adds a whole tensor of a fixed-size dtype: len must be
 * elements(shape) * ckpt_dtype_size(dtype).  Names must be unique and not "".
 * Tensors are stored in the data file in the order added; the index is sorted
 * by name at finish. */
int ckpt_writer_add(struct ckpt_writer *w, const char *name, int dtype, int rank,
                    const int64_t *dims, const void *data, size_t len, struct ckpt_err *err);

/* Adds a string tensor of elements(shape) strings: strs[i] of lens[i] bytes
 * (lens NULL = NUL-terminated strings).  TensorFlow's layout: varint64
 * lengths, masked crc32c of the lengths, then the bytes. */
int ckpt_writer_add_strings(struct ckpt_writer *w, const char *name, int rank, const int64_t *dims,
                            const char *const *strs, const size_t *lens, struct ckpt_err *err);

/* Streams a fixed-size-dtype tensor in pieces: begin, append any number of
 * times, end.  The pieces must add up to exactly the tensor's byte size. */
int ckpt_writer_begin(struct ckpt_writer *w, const char *name, int dtype, int rank,
                      const int64_t *dims, struct ckpt_err *err);
int ckpt_writer_append(struct ckpt_writer *w, const void *data, size_t len, struct ckpt_err *err);
int ckpt_writer_end(struct ckpt_writer *w, struct ckpt_err *err);

/* Bytes written to the data file so far. */
uint64_t ckpt_writer_data_size(const struct ckpt_writer *w);

enum {
    CKPT_SYNC = 1u << 0, /* fsync the files before renaming them, and the
                            directory after: durable once this returns 0 */
};

/* Flushes the data file, writes the index, renames both into place (fsync
 * as asked by flags).  Always frees w; on failure removes the temporary
 * files and leaves no file under a final name that was not there before. */
int ckpt_writer_finish(struct ckpt_writer *w, unsigned flags, struct ckpt_err *err);
/* Drops everything written (removes the temporary files) and frees w. */
void ckpt_writer_abort(struct ckpt_writer *w);
/* fsyncs every directory above dir along its path ("a/b/c": a/b, a and
 * "."; "/x/y/c": /x/y and /x, not "/"): each holds the entry of the next,
 * which a crash may lose unless synced (a directory created by mkdir -p is
 * durable only once its parent is synced).  0 or -errno. */
int ckpt_fsync_ancestors(const char *dir);

/* ---- reader ------------------------------------------------------------ */

/* States: open (index parsed and every index block crc checked; data files
 * opened on first use) -> closed.  Entry pointers stay valid until close. */
struct ckpt_reader;

struct ckpt_header {
    int32_t num_shards;
    int endianness; /* 0 little, 1 big */
    int32_t producer;
    int32_t min_consumer;
    int nbad_consumers;
    const int32_t *bad_consumers;
};

struct ckpt_entry {
    const char *name; /* NUL-terminated (slice keys may hold NULs:
                         use name_len) */
    size_t name_len;
    int dtype;
    int rank; /* -1 when the shape proto says unknown_rank */
    const int64_t *dims;
    int32_t shard_id;
    int64_t offset;
    int64_t size;
    uint32_t crc32c; /* masked, as stored */
    int nslices;     /* > 0: a partitioned tensor's full entry */
    const struct ckpt_slice *slices;
};

/* Opens PREFIX.index, checks footer, every block crc, the header and every
 * entry's encoding. */
int ckpt_reader_open(struct ckpt_reader **rp, const char *prefix, struct ckpt_err *err);
/* The same, with PREFIX and the data files resolved inside the directory
 * ROOT as if it were "/" (openat2 RESOLVE_IN_ROOT, Linux >= 5.6): neither
 * "..", an absolute path nor a symlink leads out of it.  The reader keeps
 * its own copy of ROOT. */
int ckpt_reader_open_in(struct ckpt_reader **rp, int root, const char *prefix,
                        struct ckpt_err *err);
void ckpt_reader_close(struct ckpt_reader *r);

const char *ckpt_reader_prefix(const struct ckpt_reader *r);
const struct ckpt_header *ckpt_reader_header(const struct ckpt_reader *r);
/* Entries sorted by name (bytewise), the header entry excluded. */
size_t ckpt_reader_count(const struct ckpt_reader *r);
const struct ckpt_entry *ckpt_reader_entry(const struct ckpt_reader *r, size_t i);
const struct ckpt_entry *ckpt_reader_find(const struct ckpt_reader *r, const char *name);

/* Reads the whole stored bytes of a tensor into buf (buflen >= ent->size)
 * and checks the crc: on any mismatch returns -EBADMSG and buf's contents
 * are unspecified.  For fixed-size dtypes also checks size == elements *
 * dtype size.  Returns 0. */
int ckpt_reader_read(struct ckpt_reader *r, const struct ckpt_entry *ent, void *buf, size_t buflen,
                     struct ckpt_err *err);
/* Reads stored bytes [off, off+len) of a tensor without checking the crc
 * (which covers the whole tensor): for partial restores.  -EINVAL if the
 * range is outside the tensor. */
int ckpt_reader_read_range(struct ckpt_reader *r, const struct ckpt_entry *ent, uint64_t off,
                           void *buf, size_t len, struct ckpt_err *err);

/* A decoded string tensor: n strings, strs[i] of lens[i] bytes (each also
 * NUL-terminated).  One allocation: free with ckpt_strings_free. */
struct ckpt_strings {
    size_t n;
    const char **strs;
    const uint64_t *lens;
};
/* Reads, checks (length crc and tensor crc) and decodes a string tensor. */
int ckpt_reader_read_strings(struct ckpt_reader *r, const struct ckpt_entry *ent,
                             struct ckpt_strings **out, struct ckpt_err *err);
void ckpt_strings_free(struct ckpt_strings *s);

/* Streams through one tensor's bytes and checks its crc (and, for strings,
 * the layout).  0 or -EBADMSG/-ENOENT/-EIO with a message. */
int ckpt_reader_verify_entry(struct ckpt_reader *r, const struct ckpt_entry *ent,
                             struct ckpt_err *err);
/* Checks every data file exists and every tensor's crc.  Returns 0 or the
 * first error. */
int ckpt_reader_verify(struct ckpt_reader *r, struct ckpt_err *err);

/* ---- merge ------------------------------------------------------------- */

enum {
    CKPT_MERGE_DELETE_OLD_DIRS = 1u << 0, /* rmdir each part's directory (if not
                                             the merged one), errors ignored:
                                             MergeV2Checkpoints' default */
    CKPT_MERGE_SYNC = 1u << 1,            /* fsync the merged index and the
                                             directories touched */
};

/* TensorFlow's MergeBundles + MergeV2Checkpoints: creates dirname(merged)
 * (last component only), reads every part's index (in order), renumbers the
 * shards in order of first use, renames each part's data files to
 * MERGED.data-%05d-of-%05d, writes MERGED.index (temp name + rename), then
 * deletes the parts' index files (errors ignored) and, with
 * CKPT_MERGE_DELETE_OLD_DIRS, their directories.  A part whose index is
 * missing fails with -ENOENT, err->call "stat" and err->path the index path
 * (TensorFlow: "NotFoundError: PATH; No such file or directory"), before
 * anything is renamed.  Returns the number of tensors merged. */
int ckpt_merge(const char *const *prefixes, size_t nprefixes, const char *merged_prefix,
               unsigned flags, struct ckpt_err *err);

#endif
