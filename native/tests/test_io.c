/* test_io.c - reads around the page cache (io_read_direct): any offset and length come back
 * byte for byte as pread gives them, across the bounce buffer's size, and a read past the
 * end stops where the file ends. Where the file system refuses O_DIRECT (tmpfs, at the open
 * or at the first read), the test says so and checks only that it is refused cleanly. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "io.h"
#include "test_files.h"

/* A file of n bytes whose byte k is (k * 7 + k / 4099) & 255: no period near the alignment. */
static int io_write_pattern(const char *dir, size_t n) {
    uint8_t *buf = malloc(n);
    if (!buf)
        return -1;
    for (size_t k = 0; k < n; k++)
        buf[k] = (uint8_t)(k * 7 + k / 4099);
    const int rc = tf_write(dir, "data.bin", buf, n);
    free(buf);
    return rc;
}

static int io_pattern_matches(const uint8_t *got, uint64_t offset, size_t len) {
    for (size_t k = 0; k < len; k++)
        if (got[k] != (uint8_t)((offset + k) * 7 + (offset + k) / 4099))
            return 0;
    return 1;
}

TEST(io_read_direct_returns_any_range_byte_for_byte_and_stops_at_the_end_of_the_file) {
    char dir[64], path[128];
    CHECK(tf_mkdtemp(dir));
    const size_t size = IO_BOUNCE_BYTES + 3 * IO_DIRECT_ALIGN + 777; /* ends inside a block */
    CHECK(io_write_pattern(dir, size) == 0);
    snprintf(path, sizeof path, "%s/data.bin", dir);
    const int fd = io_open_direct(path);
    if (fd < 0) {
        fprintf(stderr, "  (O_DIRECT refused here: %s; the engine reads through the page cache)\n", strerror(errno));
        CHECK(errno == EINVAL || errno == EOPNOTSUPP);
        tf_rmtree(dir);
        return;
    }
    void *bounce = io_bounce_alloc();
    uint8_t *out = malloc(size + 1);
    CHECK(bounce && out);
    int first_error = 0;
    if (io_read_direct(fd, out, 1, 0, bounce, &first_error) == 0 && first_error == EINVAL) {
        /* opened, but its reads refused: the engine then reads through the page cache */
        fprintf(stderr, "  (O_DIRECT reads refused here; the engine reads through the page cache)\n");
        close(fd);
        io_bounce_free(bounce);
        free(out);
        tf_rmtree(dir);
        return;
    }
    /* offset, length: the first byte, one across a block edge, an unaligned run longer than
     * the bounce buffer, the whole file, and the last bytes */
    const struct {
        uint64_t offset;
        size_t len;
    } cases[] = {{0, 1},       {IO_DIRECT_ALIGN - 1, 2},  {5, IO_BOUNCE_BYTES + 10000}, {0, size},
                 {size - 3, 3}, {IO_DIRECT_ALIGN, IO_DIRECT_ALIGN}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int error = -1;
        memset(out, 0, size + 1);
        const size_t got = io_read_direct(fd, out + 1, cases[c].len, cases[c].offset, bounce, &error); /* odd dst */
        CHECK_INT(error, 0);
        CHECK_INT(got, cases[c].len);
        CHECK(io_pattern_matches(out + 1, cases[c].offset, cases[c].len));
        CHECK_INT(out[0], 0); /* nothing written before the destination, nor after it */
        if (cases[c].len < size)
            CHECK_INT(out[1 + cases[c].len], 0);
    }
    /* past the end: the bytes that exist, then a short count with no error */
    int error = -1;
    const size_t got = io_read_direct(fd, out, 100, size - 40, bounce, &error);
    CHECK_INT(error, 0);
    CHECK_INT(got, 40);
    CHECK(io_pattern_matches(out, size - 40, 40));
    CHECK_INT(io_read_direct(fd, out, 10, size + 5000, bounce, &error), 0);
    close(fd);
    io_bounce_free(bounce);
    free(out);
    tf_rmtree(dir);
}
