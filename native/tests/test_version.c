/* test_version.c - the public header compiles as plain C11 and its names are stable. */
#include "harness.h"
#include "k3.h"

#include <string.h>

TEST(version_string_matches_the_header_numbers) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", K3_VERSION_MAJOR, K3_VERSION_MINOR, K3_VERSION_PATCH);
    CHECK(strcmp(k3_version(), want) == 0);
}

TEST(every_status_code_has_a_distinct_name) {
    for (int a = K3_OK; a <= K3_ERR_INTERNAL; a++) {
        CHECK(strcmp(k3_status_name((k3_status)a), "unknown") != 0);
        for (int b = a + 1; b <= K3_ERR_INTERNAL; b++)
            CHECK(strcmp(k3_status_name((k3_status)a), k3_status_name((k3_status)b)) != 0);
    }
    CHECK(strcmp(k3_status_name(K3_ERR_EXPERT_READ), "expert-read") == 0);
}
