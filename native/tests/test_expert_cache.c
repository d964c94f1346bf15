/* test_expert_cache.c - the routed-expert cache on a shard written here: every expert
 * served has its bytes exactly as in the file (back-to-back experts in one read, a split
 * one in several), LRU eviction and the retained count, a cache smaller than one job,
 * a job abandoned halfway, and reads that fail (an injected fault, a shard truncated after
 * opening) ending the job with K3_ERR_EXPERT_READ naming the expert, its layer, the file
 * and the offset; reads around the page cache (O_DIRECT) serve the same bytes and fail
 * the same way. Early reads (expert_cache_prefetch): a guess warms the slots the next job
 * then finds, a wrong one is one wasted read, they never take a slot the running job holds,
 * and a failed early read is forgotten: the job reads the expert again and succeeds, or
 * fails naming it as a job's own read would. */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "expert_cache.h"
#include "safetensors.h"
#include "test_files.h"

enum { EC_LAYERS = 2, EC_EXPERTS = 6, EC_INTER = 32, EC_LATENT = 64 };

typedef struct {
    char name[96];
    int rows, cols; /* U8 shape */
} ec_tdesc;

/* Tensors in file order: layer l's experts in the order 3, 0, 5, 1, 4, 2 with a filler
 * tensor between experts 0 and 5; expert 4 has its w2 tensors after everything else, so
 * it takes two reads. */
static int ec_plan(ec_tdesc *t) {
    static const int order[EC_EXPERTS] = {3, 0, 5, 1, 4, 2};
    int n = 0;
    for (int l = 0; l < EC_LAYERS; l++)
        for (int i = 0; i < EC_EXPERTS; i++) {
            const int e = order[i];
            static const char *w[3] = {"w1", "w3", "w2"};
            for (int k = 0; k < 3; k++) {
                if (e == 4 && k == 2)
                    continue;
                const int rows = k == 2 ? EC_LATENT : EC_INTER, cols = k == 2 ? EC_INTER : EC_LATENT;
                snprintf(t[n].name, sizeof t[n].name, "l%d.e%d.%s.packed", l, e, w[k]);
                t[n].rows = rows;
                t[n++].cols = cols / 2;
                snprintf(t[n].name, sizeof t[n].name, "l%d.e%d.%s.scale", l, e, w[k]);
                t[n].rows = rows;
                t[n++].cols = cols / 32;
            }
            if (e == 0) {
                snprintf(t[n].name, sizeof t[n].name, "l%d.filler", l);
                t[n].rows = 3;
                t[n++].cols = 5;
            }
        }
    for (int l = 0; l < EC_LAYERS; l++) {
        snprintf(t[n].name, sizeof t[n].name, "l%d.e4.w2.packed", l);
        t[n].rows = EC_LATENT;
        t[n++].cols = EC_INTER / 2;
        snprintf(t[n].name, sizeof t[n].name, "l%d.e4.w2.scale", l);
        t[n].rows = EC_LATENT;
        t[n++].cols = EC_INTER / 32;
    }
    return n;
}

/* Writes dir/model.safetensors with the planned U8 tensors; data byte k is (k * 13 + 5). */
static int ec_write(const char *dir) {
    static ec_tdesc t[256];
    const int n = ec_plan(t);
    static char header[65536];
    size_t h = 0;
    uint64_t off = 0;
    h += (size_t)snprintf(header + h, sizeof header - h, "{");
    for (int i = 0; i < n; i++) {
        const uint64_t end = off + (uint64_t)t[i].rows * (uint64_t)t[i].cols;
        h += (size_t)snprintf(header + h, sizeof header - h,
                              "%s\"%s\": {\"dtype\": \"U8\", \"shape\": [%d, %d], \"data_offsets\": [%llu, %llu]}",
                              i ? ", " : "", t[i].name, t[i].rows, t[i].cols, (unsigned long long)off,
                              (unsigned long long)end);
        off = end;
    }
    h += (size_t)snprintf(header + h, sizeof header - h, "}");
    while (h % 8)
        header[h++] = ' ';
    uint8_t *buf = malloc(8 + h + off);
    if (!buf)
        return -1;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    for (uint64_t k = 0; k < off; k++)
        buf[8 + h + k] = (uint8_t)(k * 13 + 5);
    const int rc = tf_write(dir, "model.safetensors", buf, 8 + h + off);
    free(buf);
    return rc;
}

static const st_tensor *ec_find(const st_set *set, int l, int e, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "l%d.e%d.%s", l, e, what);
    return st_find(set, name);
}

/* Opens the shard and a cache of n_slots slots over it; direct: its readers read around the
 * page cache where the file system allows (*direct_open: whether it did). */
static k3_status ec_open_reading(const char *dir, int n_slots, long fault, int direct, int *direct_open, st_set **set,
                                 expert_cache **ec, k3_error *err) {
    k3_status s = st_open(dir, set, err);
    if (s == K3_OK && direct_open)
        *direct_open = st_open_direct(*set) > 0;
    if (s == K3_OK)
        s = expert_cache_new(*set, EC_LAYERS, EC_EXPERTS, ec, err);
    if (s != K3_OK)
        return s;
    static const char *w[3] = {"w1", "w3", "w2"};
    for (int l = 0; l < EC_LAYERS; l++)
        for (int e = 0; e < EC_EXPERTS; e++)
            for (int k = 0; k < 3; k++) {
                char p[16], q[16];
                snprintf(p, sizeof p, "%s.packed", w[k]);
                snprintf(q, sizeof q, "%s.scale", w[k]);
                const kernels_matrix shape = {KERNELS_MXFP4, k == 2 ? EC_LATENT : EC_INTER,
                                              k == 2 ? EC_INTER : EC_LATENT, NULL, NULL};
                expert_cache_add(*ec, l, 10 + l, e, k, &shape, ec_find(*set, l, e, p), ec_find(*set, l, e, q));
            }
    s = expert_cache_layout(*ec, err);
    if (s == K3_OK)
        s = expert_cache_start(*ec, n_slots, 2, direct, fault, err);
    return s;
}

static k3_status ec_open(const char *dir, int n_slots, long fault, st_set **set, expert_cache **ec, k3_error *err) {
    return ec_open_reading(dir, n_slots, fault, 0, NULL, set, ec, err);
}

/* True when the borrowed expert's six arrays hold the file's bytes. */
static int ec_matches(const st_set *set, int l, int e, const moe_expert *x) {
    static const char *w[3] = {"w1", "w3", "w2"};
    const kernels_matrix *m[3] = {&x->w1, &x->w3, &x->w2};
    for (int k = 0; k < 3; k++) {
        char p[16], q[16];
        snprintf(p, sizeof p, "%s.packed", w[k]);
        snprintf(q, sizeof q, "%s.scale", w[k]);
        const st_tensor *tp = ec_find(set, l, e, p), *tq = ec_find(set, l, e, q);
        if (m[k]->type != KERNELS_MXFP4 || m[k]->rows != (int)tp->shape[0] || m[k]->cols != 2 * (int)tp->shape[1] ||
            memcmp(m[k]->data, tp->data, tp->nbytes) || memcmp(m[k]->scale, tq->data, tq->nbytes))
            return 0;
    }
    return 1;
}

/* Runs one job over experts (ascending) of layer l, checking every byte, while guessing
 * `guess` (g of them; none when g is 0) for layer l + 1; 1 if all match. */
static int ec_job_guessing(expert_cache *ec, const st_set *set, int l, const int *experts, int n, const int *guess,
                           int g) {
    expert_cache_begin(ec, l, experts, n);
    if (g > 0)
        expert_cache_prefetch(ec, l + 1, guess, g);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        moe_expert x;
        k3_error err = {0};
        if (expert_cache_get(ec, i, &x, &err) != K3_OK) {
            fprintf(stderr, "  get %d: %s\n", i, err.detail);
            ok = 0;
            break;
        }
        ok = ec_matches(set, l, experts[i], &x);
        expert_cache_release(ec, i);
    }
    expert_cache_end(ec);
    return ok;
}

static int ec_job(expert_cache *ec, const st_set *set, int l, const int *experts, int n) {
    return ec_job_guessing(ec, set, l, experts, n, NULL, 0);
}

TEST(expert_cache_serves_every_expert_byte_for_byte_and_counts_retained_and_evictions) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    CHECK_OK(ec_open(dir, 4, 0, &set, &ec, &err), err);
    /* one expert: 2 x (1024 + 64) + (1024 + 64) = 3264 bytes; expert 4 is two runs, the
     * second starting 64-aligned: 2176 -> 2176 + 1088 = 3264 */
    CHECK_INT(expert_cache_slot_bytes(ec), 3264);
    CHECK_INT(expert_cache_pool_bytes(ec), EC_LAYERS * EC_EXPERTS * 3264);

    const int all[EC_EXPERTS] = {0, 1, 2, 3, 4, 5};
    CHECK(ec_job(ec, set, 0, all, 6)); /* more experts than slots: the window makes progress */
    expert_cache_counters c;
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.requests, 6);
    CHECK_INT(c.reads, 6);
    CHECK_INT(c.retained, 0);
    CHECK_INT(c.evictions, 2);
    CHECK_INT(c.bytes_read, 6 * 3264);

    /* 2..5 are the four most recent: all retained */
    const int tail[4] = {2, 3, 4, 5};
    CHECK(ec_job(ec, set, 0, tail, 4));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.retained, 4);
    CHECK_INT(c.reads, 6);

    /* layer 1's experts are different keys: read, evicting layer 0's least recent */
    const int two[2] = {1, 4};
    CHECK(ec_job(ec, set, 1, two, 2));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.reads, 8);
    CHECK_INT(c.evictions, 4);
    const int again[3] = {1, 4, 5};
    CHECK(ec_job(ec, set, 1, again, 3));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.retained, 6); /* 1 and 4 of layer 1 */
    CHECK_INT(c.reads, 9);
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}

TEST(expert_cache_reading_around_the_page_cache_serves_the_same_bytes_and_counts_them) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    int direct = 0;
    CHECK_OK(ec_open_reading(dir, 3, 0, 1, &direct, &set, &ec, &err), err);
    if (!direct)
        fprintf(stderr, "  (O_DIRECT refused here: the readers fall back to the page cache)\n");
    /* every expert of both layers, at odd offsets, two of them in two runs */
    const int all[EC_EXPERTS] = {0, 1, 2, 3, 4, 5};
    CHECK(ec_job(ec, set, 0, all, 6));
    CHECK(ec_job(ec, set, 1, all, 6));
    expert_cache_counters c;
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.reads, 12);
    CHECK_INT(c.bytes_read, 12 * 3264);
    CHECK_INT(c.direct_bytes, direct ? c.bytes_read : 0);
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}

TEST(expert_cache_with_one_slot_and_an_abandoned_job_still_serves_the_next) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    CHECK_OK(ec_open(dir, 1, 0, &set, &ec, &err), err);
    const int all[EC_EXPERTS] = {0, 1, 2, 3, 4, 5};
    CHECK(ec_job(ec, set, 1, all, 6));
    /* take one expert of four, then end: readers stop, pins are dropped */
    const int four[4] = {0, 2, 3, 5};
    expert_cache_begin(ec, 0, four, 4);
    moe_expert x;
    CHECK_OK(expert_cache_get(ec, 0, &x, &err), err);
    CHECK(ec_matches(set, 0, 0, &x));
    expert_cache_release(ec, 0);
    expert_cache_end(ec);
    CHECK(ec_job(ec, set, 0, four, 4));
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}

TEST(expert_cache_injected_read_fault_fails_the_job_with_expert_read_naming_expert_file_offset) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    CHECK_OK(ec_open(dir, 8, 2, &set, &ec, &err), err); /* the 2nd read fails */
    const int three[3] = {1, 3, 5};
    expert_cache_begin(ec, 1, three, 3);
    moe_expert x;
    k3_status s = K3_OK;
    int i = 0;
    for (; i < 3 && (s = expert_cache_get(ec, i, &x, &err)) == K3_OK; i++)
        expert_cache_release(ec, i);
    expert_cache_end(ec);
    CHECK_INT(s, K3_ERR_EXPERT_READ);
    CHECK(i <= 1); /* the failure surfaces no later than the failed item */
    CHECK(strstr(err.detail, "routed expert 3 of layer 11 could not be read"));
    CHECK(strstr(err.detail, "model.safetensors"));
    CHECK(strstr(err.detail, "at offset "));
    CHECK(strstr(err.detail, "injected fault"));
    /* the failed slot was emptied: the same job now succeeds with fresh reads */
    CHECK(ec_job(ec, set, 1, three, 3));
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}

/* Through the page cache, then around it: a short read is refused the same way. */
TEST(expert_cache_shard_truncated_after_opening_fails_with_expert_read_not_a_partial_expert) {
    for (int direct = 0; direct < 2; direct++) {
        char dir[64], path[128];
        CHECK(tf_mkdtemp(dir));
        CHECK(ec_write(dir) == 0);
        st_set *set = NULL;
        expert_cache *ec = NULL;
        k3_error err = {0};
        CHECK_OK(ec_open_reading(dir, 8, 0, direct, NULL, &set, &ec, &err), err);
        const int first[2] = {0, 3};
        CHECK(ec_job(ec, set, 0, first, 2));
        /* cut the file in the middle of layer 1's expert 2 (written last among layer 1's runs) */
        const st_tensor *t = ec_find(set, 1, 2, "w3.packed");
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(truncate(path, (off_t)(t->file_offset + 100)) == 0);
        const int want[2] = {1, 2};
        expert_cache_begin(ec, 1, want, 2);
        moe_expert x;
        k3_status s = expert_cache_get(ec, 0, &x, &err);
        if (s == K3_OK) {
            expert_cache_release(ec, 0);
            s = expert_cache_get(ec, 1, &x, &err);
        }
        expert_cache_end(ec);
        CHECK_INT(s, K3_ERR_EXPERT_READ);
        CHECK(strstr(err.detail, "routed expert 2 of layer 11 could not be read"));
        CHECK(strstr(err.detail, "the file ends after"));
        char off[48];
        snprintf(off, sizeof off, "at offset %llu", (unsigned long long)ec_find(set, 1, 2, "w1.packed")->file_offset);
        CHECK(strstr(err.detail, off));
        /* experts read before the truncation are still served from their slots */
        expert_cache_counters c;
        expert_cache_get_counters(ec, &c);
        const uint64_t reads = c.reads;
        CHECK(ec_job(ec, set, 0, first, 2));
        expert_cache_get_counters(ec, &c);
        CHECK_INT(c.reads, reads);
        expert_cache_free(ec);
        st_close(set);
        tf_rmtree(dir);
    }
}


TEST(expert_cache_early_reads_warm_the_next_job_and_count_guesses_routed_and_used) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    CHECK_OK(ec_open(dir, 8, 0, &set, &ec, &err), err);
    const int now[3] = {0, 1, 2}, guess[3] = {1, 3, 4}, next[3] = {1, 4, 5};
    CHECK(ec_job_guessing(ec, set, 0, now, 3, guess, 3));
    expert_cache_wait_early(ec);
    expert_cache_counters c;
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.guesses, 3);
    CHECK_INT(c.early_reads, 3);
    CHECK_INT(c.early_bytes, 3 * 3264);
    CHECK_INT(c.reads, 6);
    CHECK_INT(c.early_used, 0);
    /* the next job: 1 and 4 were guessed and are served from the early reads (byte for
     * byte), 5 is read; 3 was a wasted read */
    CHECK(ec_job(ec, set, 1, next, 3));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.guesses_routed, 2);
    CHECK_INT(c.early_used, 2);
    CHECK_INT(c.reads, 7);
    CHECK_INT(c.retained, 0); /* early reads are counted as such, not as retained */
    CHECK(c.early_used_seconds >= 0.0 && c.early_used_seconds <= c.read_seconds);
    /* a job that asks again finds them retained as usual */
    CHECK(ec_job(ec, set, 1, next, 3));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.retained, 3);
    CHECK_INT(c.early_used, 2);
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}

TEST(expert_cache_early_reads_never_take_a_slot_the_running_job_holds) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    for (int slots = 4; slots <= 5; slots++) {
        st_set *set = NULL;
        expert_cache *ec = NULL;
        k3_error err = {0};
        CHECK_OK(ec_open(dir, slots, 0, &set, &ec, &err), err);
        const int four[4] = {0, 1, 2, 3}, guess[3] = {0, 1, 2};
        /* the job holds four slots: with four there is no room for a guess, with five one */
        expert_cache_begin(ec, 0, four, 4);
        expert_cache_prefetch(ec, 1, guess, 3);
        for (int i = 0; i < 4; i++) {
            moe_expert x;
            CHECK_OK(expert_cache_get(ec, i, &x, &err), err);
            CHECK(ec_matches(set, 0, four[i], &x));
            expert_cache_release(ec, i);
        }
        expert_cache_end(ec);
        expert_cache_wait_early(ec);
        expert_cache_counters c;
        expert_cache_get_counters(ec, &c);
        CHECK_INT(c.early_reads, slots - 4);
        CHECK_INT(c.reads, 4 + slots - 4);
        expert_cache_free(ec);
        st_close(set);
    }
    tf_rmtree(dir);
}

TEST(expert_cache_a_failed_early_read_is_forgotten_and_the_job_reads_the_expert_again) {
    char dir[64];
    CHECK(tf_mkdtemp(dir));
    CHECK(ec_write(dir) == 0);
    st_set *set = NULL;
    expert_cache *ec = NULL;
    k3_error err = {0};
    CHECK_OK(ec_open(dir, 8, 3, &set, &ec, &err), err); /* the 3rd read (the early one) fails */
    const int now[2] = {0, 1}, guess[1] = {2};
    CHECK(ec_job_guessing(ec, set, 0, now, 2, guess, 1));
    expert_cache_wait_early(ec);
    expert_cache_counters c;
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.early_reads, 1);
    CHECK_INT(c.early_bytes, 0);
    /* nothing failed for a job: the next one reads expert 2 itself and gets its bytes */
    CHECK(ec_job(ec, set, 1, guess, 1));
    expert_cache_get_counters(ec, &c);
    CHECK_INT(c.reads, 4);
    CHECK_INT(c.early_used, 0);
    CHECK_INT(c.guesses_routed, 1);
    expert_cache_free(ec);
    st_close(set);

    /* A read that keeps failing (the shard cut short): however the job meets the early
     * read (in flight or already forgotten), it fails naming the expert, file and offset. */
    char path[128];
    CHECK_OK(ec_open(dir, 8, 0, &set, &ec, &err), err);
    const st_tensor *t = ec_find(set, 1, 2, "w3.packed");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(truncate(path, (off_t)(t->file_offset + 100)) == 0);
    expert_cache_prefetch(ec, 1, guess, 1);
    expert_cache_begin(ec, 1, guess, 1);
    moe_expert x;
    const k3_status s = expert_cache_get(ec, 0, &x, &err);
    expert_cache_end(ec);
    CHECK_INT(s, K3_ERR_EXPERT_READ);
    CHECK(strstr(err.detail, "routed expert 2 of layer 11 could not be read"));
    CHECK(strstr(err.detail, "the file ends after"));
    expert_cache_free(ec);
    st_close(set);
    tf_rmtree(dir);
}
