/* mapped_pages.h - how this process's mapped file pages are mapped: how many bytes of
 * them are resident, and how many of those in 2 MB pages. A benchmark prints it beside a
 * decode figure because decode streams the mapped weights once per token, and from 4 kB
 * pages it runs markedly slower than from 2 MB ones (docs/PERFORMANCE.md); which the
 * kernel gives depends on how the files first came into the page cache. */
#ifndef K3_MAPPED_PAGES_H
#define K3_MAPPED_PAGES_H

typedef struct mapped_pages {
    double resident_bytes; /* resident pages of mapped files (Rss less Anonymous) */
    double huge_bytes;     /* of those, mapped in 2 MB pages (FilePmdMapped) */
} mapped_pages;

/* Reads /proc/self/smaps_rollup. Returns 0, or -1 where it cannot be read (both -1). */
int mapped_pages_read(mapped_pages *out);

#endif
