/* test_trunk.c - the owned trunk on a shard written here: pinned and streamed layers come
 * back as copies of their templates whose matrices hold the file's bytes, in the fixed
 * order and out of it (a pass that stopped early), a layer read that fails (the shard
 * truncated after opening) is K3_ERR_IO naming the layer, file and offset, and embedding
 * rows are read and widened exactly. */
#include <stddef.h>
#include <unistd.h>

#include "dtype.h"
#include "kernels.h"
#include "trunk.h"
#include "test_files.h"

enum { TR_LAYERS = 4 };

typedef struct {
    int tag;
    kernels_matrix a, b;
    const float *untouched;
} tr_layer;

/* BF16 tensors l{i}.a [8 + 4i, 16], a 3-element filler, l{i}.b [16, 8]; then embed [10, 6]. */
static int tr_write(const char *dir) {
    static char header[8192];
    size_t h = 0;
    uint64_t off = 0;
    h += (size_t)snprintf(header + h, sizeof header - h, "{");
    for (int l = 0; l < TR_LAYERS; l++) {
        const int rows[3] = {8 + 4 * l, 1, 16}, cols[3] = {16, 3, 8};
        static const char *names[3] = {"a", "filler", "b"};
        for (int k = 0; k < 3; k++) {
            const uint64_t end = off + 2u * (uint64_t)rows[k] * (uint64_t)cols[k];
            h += (size_t)snprintf(header + h, sizeof header - h,
                                  "%s\"l%d.%s\": {\"dtype\": \"BF16\", \"shape\": [%d, %d], \"data_offsets\": [%llu, %llu]}",
                                  h > 1 ? ", " : "", l, names[k], rows[k], cols[k], (unsigned long long)off,
                                  (unsigned long long)end);
            off = end;
        }
    }
    const uint64_t end = off + 2u * 10 * 6;
    h += (size_t)snprintf(header + h, sizeof header - h,
                          ", \"embed\": {\"dtype\": \"BF16\", \"shape\": [10, 6], \"data_offsets\": [%llu, %llu]}}",
                          (unsigned long long)off, (unsigned long long)end);
    off = end;
    while (h % 8)
        header[h++] = ' ';
    uint8_t *buf = malloc(8 + h + off);
    if (!buf)
        return -1;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    for (uint64_t k = 0; k < off; k++)
        buf[8 + h + k] = (uint8_t)(k * 29 + 3);
    const int rc = tf_write(dir, "model.safetensors", buf, 8 + h + off);
    free(buf);
    return rc;
}

static const st_tensor *tr_find(const st_set *set, int l, const char *what) {
    char name[32];
    snprintf(name, sizeof name, "l%d.%s", l, what);
    return st_find(set, name);
}

static tr_layer templates[TR_LAYERS];

/* direct: the ring reads around the page cache where the file system allows (*direct_open:
 * whether it does). */
static k3_status tr_open(const char *dir, const trunk_layout *layout, int direct, int *direct_open, st_set **set,
                         trunk **tr, k3_error *err) {
    k3_status s = st_open(dir, set, err);
    *direct_open = s == K3_OK && direct && st_open_direct(*set) > 0;
    if (s == K3_OK)
        s = trunk_new(*set, TR_LAYERS, templates, sizeof templates[0], tr, err);
    for (int l = 0; s == K3_OK && l < TR_LAYERS; l++) {
        templates[l] = (tr_layer){100 + l, {KERNELS_BF16, 8 + 4 * l, 16, NULL, NULL}, {KERNELS_BF16, 16, 8, NULL, NULL},
                                  NULL};
        s = trunk_add(*tr, l, offsetof(tr_layer, a), tr_find(*set, l, "a"), err);
        if (s == K3_OK)
            s = trunk_add(*tr, l, offsetof(tr_layer, b), tr_find(*set, l, "b"), err);
    }
    if (s == K3_OK) {
        trunk_set_embed(*tr, st_find(*set, "embed"));
        s = trunk_start(*tr, layout, direct, NULL, NULL, err);
    }
    return s;
}

/* Acquires layer l, checks its tag and bytes, releases it; 1 if all good. */
static int tr_visit(trunk *tr, const st_set *set, int l) {
    const void *p;
    k3_error err = {0};
    if (trunk_acquire(tr, l, &p, &err) != K3_OK) {
        fprintf(stderr, "  layer %d: %s\n", l, err.detail);
        return 0;
    }
    const tr_layer *ly = p;
    const st_tensor *a = tr_find(set, l, "a"), *b = tr_find(set, l, "b");
    const int ok = ly->tag == 100 + l && ly->a.rows == 8 + 4 * l && ly->untouched == NULL &&
                   !memcmp(ly->a.data, a->data, a->nbytes) && !memcmp(ly->b.data, b->data, b->nbytes) &&
                   ly->a.data != a->data;
    trunk_release(tr, l);
    return ok;
}

/* The ring read through the page cache, then around it (O_DIRECT): the same bytes either way,
 * and the pinned layer read through the page cache both times. */
TEST(trunk_streams_layers_in_order_and_out_of_order_with_the_file_bytes) {
    for (int direct = 0; direct < 2; direct++) {
        char dir[64];
        CHECK(tf_mkdtemp(dir));
        CHECK(tr_write(dir) == 0);
        st_set *set = NULL;
        trunk *tr = NULL;
        k3_error err = {0};
        trunk_layout layout;
        memset(&layout, 0, sizeof layout);
        layout.pinned[3] = 1;
        layout.ring_slots = 2;
        /* a slot holds the largest streamed layer: a and b are separate runs (the filler sits
         * between them), each 64-aligned */
        layout.slot_bytes = 2 * (8 + 4 * 2) * 16 + 2 * 16 * 8; /* layer 2: 512 + 256 */
        int direct_open = 0;
        CHECK_OK(tr_open(dir, &layout, direct, &direct_open, &set, &tr, &err), err);
        if (direct && !direct_open)
            fprintf(stderr, "  (O_DIRECT refused here: the ring reads through the page cache)\n");
        CHECK_INT(trunk_layer_bytes(tr, 0), 256 + 256);
        CHECK_INT(trunk_layer_bytes(tr, 2), 512 + 256);
        for (int pass = 0; pass < 3; pass++)
            for (int l = 0; l < TR_LAYERS; l++)
                CHECK(tr_visit(tr, set, l));
        /* a pass that stopped after layer 1, then a new one from layer 0 */
        CHECK(tr_visit(tr, set, 0));
        CHECK(tr_visit(tr, set, 1));
        for (int l = 0; l < TR_LAYERS; l++)
            CHECK(tr_visit(tr, set, l));
        CHECK(tr_visit(tr, set, 2));
        CHECK(tr_visit(tr, set, 1));
        trunk_counters c;
        trunk_get_counters(tr, &c);
        CHECK_INT(c.pinned_bytes, 2 * (8 + 4 * 3) * 16 + 2 * 16 * 8);
        CHECK(c.layer_reads >= 3 * 3 + 2 + 3 + 2);
        CHECK_INT(c.direct_bytes, direct_open ? c.bytes_read : 0); /* every streamed byte; none pinned */
        /* embedding rows, widened from bf16 */
        float row[6];
        CHECK_OK(trunk_embed_row(tr, 7, row, &err), err);
        const uint16_t *e = (const uint16_t *)st_find(set, "embed")->data + 7 * 6;
        for (int i = 0; i < 6; i++) {
            const float want = dtype_bf16_to_f32(e[i]);
            CHECK(!memcmp(&row[i], &want, sizeof want)); /* bits: the pattern may spell a NaN */
        }
        trunk_free(tr);
        st_close(set);
        tf_rmtree(dir);
    }
}

TEST(trunk_layer_read_failure_is_io_naming_layer_file_and_offset) {
    for (int direct = 0; direct < 2; direct++) {
        char dir[64], path[128];
        CHECK(tf_mkdtemp(dir));
        CHECK(tr_write(dir) == 0);
        st_set *set = NULL;
        trunk *tr = NULL;
        k3_error err = {0};
        trunk_layout layout;
        memset(&layout, 0, sizeof layout);
        layout.ring_slots = 2;
        layout.slot_bytes = 2 * (8 + 4 * 3) * 16 + 2 * 16 * 8;
        int direct_open = 0;
        CHECK_OK(tr_open(dir, &layout, direct, &direct_open, &set, &tr, &err), err);
        for (int l = 0; l < TR_LAYERS; l++)
            CHECK(tr_visit(tr, set, l));
        /* the reader now holds layers 0 and 1 for the next pass; cut the file inside layer 3 */
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        const st_tensor *b3 = tr_find(set, 3, "b");
        CHECK(truncate(path, (off_t)(b3->file_offset + 10)) == 0);
        const void *p;
        CHECK_ERROR(trunk_acquire(tr, 3, &p, &err), err, K3_ERR_IO, "trunk layer 3 could not be read");
        char want[160];
        snprintf(want, sizeof want, "at offset %llu of %s", (unsigned long long)b3->file_offset, dir);
        CHECK(strstr(err.detail, want));
        CHECK(strstr(err.detail, "the file ends after 10 of them"));
        /* layers before the cut still stream */
        CHECK(tr_visit(tr, set, 0));
        CHECK(tr_visit(tr, set, 1));
        trunk_free(tr);
        st_close(set);
        tf_rmtree(dir);
    }
}
