/* mapped_pages.c - the resident and 2 MB-mapped bytes of this process's file mappings (see
 * mapped_pages.h), from the kernel's summary of its mappings. */
#include "mapped_pages.h"

#include <stdio.h>

int mapped_pages_read(mapped_pages *out) {
    out->resident_bytes = out->huge_bytes = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    double rss = -1, anon = -1, pmd = -1;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "Rss: %llu kB", &kb) == 1)
            rss = kb * 1024.0;
        else if (sscanf(line, "Anonymous: %llu kB", &kb) == 1)
            anon = kb * 1024.0;
        else if (sscanf(line, "FilePmdMapped: %llu kB", &kb) == 1)
            pmd = kb * 1024.0;
    }
    fclose(f);
    if (rss < 0 || anon < 0 || pmd < 0)
        return -1;
    out->resident_bytes = rss - anon;
    out->huge_bytes = pmd;
    return 0;
}
