/*
 * gen_seeds.c: writes the starting corpus for fuzz_index: bundles made by
 * the library's own writer (float scalars like half_plus_three, every dtype
 * with strings and empty tensors, enough entries for several index blocks,
 * snappy-compressed index blocks, data alignment) and hand-built tables
 * (sliced entries, a multi-shard header, bad_consumers), each packed as
 * [u32 index length][index][data] into DIR/seed-N.
 * usage: gen-seeds DIR
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/internal.h"

static int nseed;
static const char *outdir;

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *len = 0;
        return calloc(1, 1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

static void emit(const void *idx, size_t il, const void *dat, size_t dl)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%02d", outdir, nseed++);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    uint8_t h[4];
    ckpt_put32le(h, (uint32_t)il);
    fwrite(h, 1, 4, f);
    fwrite(idx, 1, il, f);
    fwrite(dat, 1, dl, f);
    fclose(f);
    /* the same seed in crc fix-up mode (see fuzz_index.c) */
    snprintf(path, sizeof path, "%s/seed-%02d-fixcrc", outdir, nseed - 1);
    if (!(f = fopen(path, "wb"))) {
        perror(path);
        exit(1);
    }
    ckpt_put32le(h, (uint32_t)il | 0x80000000u);
    fwrite(h, 1, 4, f);
    fwrite(idx, 1, il, f);
    fwrite(dat, 1, dl, f);
    fclose(f);
}

static void emit_bundle(const char *prefix)
{
    char p[4096];
    size_t il, dl;
    snprintf(p, sizeof p, "%s.index", prefix);
    void *idx = slurp(p, &il);
    snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
    void *dat = slurp(p, &dl);
    emit(idx, il, dat, dl);
    free(idx);
    free(dat);
}

#define CHECK(x)                                                        \
    do {                                                                \
        if ((x) != 0) {                                                 \
            fprintf(stderr, "gen-seeds: %s failed: %s\n", #x, err.msg); \
            exit(1);                                                    \
        }                                                               \
    } while (0)

int main(int argc, char **argv)
{
    struct ckpt_err err;
    struct ckpt_writer *w;
    struct ckpt_writer_opts o = {0};
    char tmp[] = "/tmp/gen-seeds-XXXXXX", prefix[4096];
    if (argc != 2) {
        fprintf(stderr, "usage: gen-seeds DIR\n");
        return 2;
    }
    outdir = argv[1];
    mkdir(outdir, 0777);
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }

    /* 1: three float scalars */
    snprintf(prefix, sizeof prefix, "%s/hpt", tmp);
    float a = 0.5f, b = 3, c = 3;
    CHECK(ckpt_writer_open(&w, prefix, NULL, &err));
    CHECK(ckpt_writer_add(w, "a", CKPT_DT_FLOAT, 0, NULL, &a, 4, &err));
    CHECK(ckpt_writer_add(w, "b", CKPT_DT_FLOAT, 0, NULL, &b, 4, &err));
    CHECK(ckpt_writer_add(w, "c", CKPT_DT_FLOAT, 0, NULL, &c, 4, &err));
    CHECK(ckpt_writer_finish(w, 0, &err));
    emit_bundle(prefix);

    /* 2: every dtype, strings, empty tensors, alignment */
    for (int variant = 0; variant < 2; variant++) {
        snprintf(prefix, sizeof prefix, "%s/all%d", tmp, variant);
        o.flags = variant ? CKPT_W_SNAPPY : 0;
        o.data_alignment = variant ? 8 : 0;
        CHECK(ckpt_writer_open(&w, prefix, &o, &err));
        static const int dts[] = {
            CKPT_DT_FLOAT,  CKPT_DT_DOUBLE,     CKPT_DT_INT32, CKPT_DT_UINT8,  CKPT_DT_INT16,
            CKPT_DT_INT8,   CKPT_DT_COMPLEX64,  CKPT_DT_INT64, CKPT_DT_BOOL,   CKPT_DT_BFLOAT16,
            CKPT_DT_UINT16, CKPT_DT_COMPLEX128, CKPT_DT_HALF,  CKPT_DT_UINT32, CKPT_DT_UINT64};
        uint8_t buf[256];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (uint8_t)(i * 7 + 1);
        for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
            char name[32];
            int64_t dims[2] = {2, 3};
            snprintf(name, sizeof name, "t/%s", ckpt_dtype_name(dts[i]));
            size_t es = ckpt_dtype_size(dts[i]);
            CHECK(ckpt_writer_add(w, name, dts[i], 2, dims, buf, 6 * es, &err));
        }
        const char *strs[] = {"", "x", "hello world", "\0\1\2"};
        size_t lens[] = {0, 1, 11, 3};
        int64_t sd[1] = {4}, zero[2] = {3, 0};
        CHECK(ckpt_writer_add_strings(w, "s/vec", 1, sd, strs, lens, &err));
        CHECK(ckpt_writer_add_strings(w, "s/scalar", 0, NULL, strs + 2, lens + 2, &err));
        CHECK(ckpt_writer_add_strings(w, "s/empty", 2, zero, NULL, NULL, &err));
        CHECK(ckpt_writer_add(w, "z/empty", CKPT_DT_FLOAT, 2, zero, NULL, 0, &err));
        CHECK(ckpt_writer_finish(w, 0, &err));
        emit_bundle(prefix);
    }

    /* 3: many entries, small blocks (several data blocks, restarts) */
    for (int variant = 0; variant < 2; variant++) {
        snprintf(prefix, sizeof prefix, "%s/many%d", tmp, variant);
        o.flags = variant ? CKPT_W_SNAPPY : 0;
        o.block_size = 256;
        o.data_alignment = 0;
        CHECK(ckpt_writer_open(&w, prefix, &o, &err));
        for (int i = 0; i < 60; i++) {
            char name[64];
            int32_t v = i;
            snprintf(name, sizeof name, "layer_%02d/kernel/Adam_%d", i / 3, i % 3);
            CHECK(ckpt_writer_add(w, name, CKPT_DT_INT32, 0, NULL, &v, 4, &err));
        }
        CHECK(ckpt_writer_finish(w, 0, &err));
        emit_bundle(prefix);
        o.block_size = 0;
    }

    /* 4: hand-built: sliced full entry + slice entries, 2 shards, bad consumers */
    {
        struct ckpt_tbl_builder *t = ckpt_tbl_new(0, false);
        struct ckpt_buf v = {0}, out = {0};
        int32_t bad[2] = {7, 9};
        struct ckpt_header h = {
            .num_shards = 2, .producer = 1, .nbad_consumers = 2, .bad_consumers = bad};
        ckpt_pb_encode_header(&v, &h);
        ckpt_tbl_add(t, "", 0, v.p, v.len);
        int64_t dims[2] = {4, 2};
        struct ckpt_extent x0[2] = {{0, 2}, {0, -1}}, x1[2] = {{2, 2}, {0, -1}};
        struct ckpt_slice sl[2] = {{2, x0}, {2, x1}};
        struct ckpt_entry full = {
            .dtype = CKPT_DT_FLOAT, .rank = 2, .dims = dims, .nslices = 2, .slices = sl};
        v.len = 0;
        ckpt_pb_encode_entry(&v, &full);
        ckpt_tbl_add(t, "emb", 3, v.p, v.len);
        int64_t pd[2] = {2, 2};
        struct ckpt_entry part = {.dtype = CKPT_DT_FLOAT,
                                  .rank = 2,
                                  .dims = pd,
                                  .shard_id = 1,
                                  .offset = 0,
                                  .size = 16,
                                  .crc32c = 0x12345678};
        v.len = 0;
        ckpt_pb_encode_entry(&v, &part);
        ckpt_tbl_add(t, "emb\0slice", 9, v.p, v.len);
        ckpt_tbl_finish(t, &out);
        float d[4] = {1, 2, 3, 4};
        emit(out.p, out.len, d, sizeof d);
        ckpt_buf_free(&v);
        ckpt_buf_free(&out);
        ckpt_tbl_free(t);
    }

    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "gen-seeds: could not remove %s\n", tmp);
    printf("gen-seeds: %d seeds in %s\n", nseed, outdir);
    return 0;
}
