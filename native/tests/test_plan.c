/* test_plan.c - memory plans without a checkpoint: how an owned-trunk budget is placed
 * (everything pinned, two ring slots, one, refused below the largest layer with both
 * numbers), the expert cache's floor, the preset table and its full-scale plans,
 * "auto" sized from a given MemAvailable: reserve first, trunk first, refused below the
 * floor, and k3_preset_resolve, the one way a name becomes budgets; a prefill batch sized to
 * what MemAvailable leaves where weights stream, the default where none do. The full-scale figures are the release's (k3-architecture §2). */
#include "forward.h"
#include "k3.h"
#include "model.h"
#include "plan.h"
#include "presets.h"
#include "test_files.h"

static plan_inputs five_layers(void) {
    plan_inputs in;
    memset(&in, 0, sizeof in);
    static const uint64_t sizes[5] = {30, 20, 20, 17, 20};
    in.n_layers = 5;
    for (int l = 0; l < 5; l++)
        in.layer_bytes[l] = sizes[l] * 1000000;
    in.expert_slot_bytes = 400000;
    in.experts = 100;
    in.top_k = 8;
    return in;
}

static int pinned_count(const trunk_layout *t, int n) {
    int k = 0;
    for (int l = 0; l < n; l++)
        k += t->pinned[l];
    return k;
}

TEST(plan_trunk_layout_pins_largest_first_and_keeps_two_ring_slots_when_it_can) {
    const plan_inputs in = five_layers();
    trunk_layout t;
    k3_error err = {0};
    CHECK_OK(plan_trunk_layout(&in, 107000000, &t, &err), err); /* the whole trunk */
    CHECK_INT(pinned_count(&t, 5), 5);
    CHECK_INT(t.ring_slots, 0);
    CHECK_OK(plan_trunk_layout(&in, 97000000, &t, &err), err);
    CHECK_INT(t.ring_slots, 2);
    CHECK_INT(t.slot_bytes, 20000000);
    CHECK(t.pinned[0] && t.pinned[1] && !t.pinned[2] && !t.pinned[3] && !t.pinned[4]); /* 50 + 2 x 20 */
    CHECK_OK(plan_trunk_layout(&in, 70000000, &t, &err), err);
    CHECK_INT(pinned_count(&t, 5), 1); /* layer 0 (30) + 2 x 20 */
    CHECK(t.pinned[0]);
    CHECK_INT(t.ring_slots, 2);
    CHECK_OK(plan_trunk_layout(&in, 60000000, &t, &err), err);
    CHECK_INT(pinned_count(&t, 5), 0);
    CHECK_INT(t.ring_slots, 2);
    CHECK_INT(t.slot_bytes, 30000000);
    CHECK_OK(plan_trunk_layout(&in, 59000000, &t, &err), err); /* below two slots: one, no overlap */
    CHECK_INT(t.ring_slots, 1);
    CHECK_INT(pinned_count(&t, 5), 1); /* layer 0 (30) + one slot of 20 */
    CHECK_INT(t.slot_bytes, 20000000);
    CHECK_OK(plan_trunk_layout(&in, 30000000, &t, &err), err);
    CHECK_INT(t.ring_slots, 1);
    CHECK_INT(pinned_count(&t, 5), 0);
    CHECK_INT(t.slot_bytes, 30000000);
}

TEST(plan_trunk_layout_refuses_below_the_largest_layer_naming_both_numbers) {
    const plan_inputs in = five_layers();
    trunk_layout t;
    k3_error err = {0};
    CHECK_ERROR(plan_trunk_layout(&in, 29999999, &t, &err), err, K3_ERR_BUDGET,
                "trunk budget 30.0 MB is below the floor of 30.0 MB: layer 0, the largest");
    CHECK_ERROR(plan_trunk_layout(&in, 0, &t, &err), err, K3_ERR_BUDGET, "(the whole trunk is 107.0 MB)");
}

TEST(plan_expert_slots_needs_top_k_slots_and_never_more_than_the_pool) {
    const plan_inputs in = five_layers();
    int slots = 0;
    k3_error err = {0};
    CHECK_OK(plan_expert_slots(&in, 3200000, &slots, &err), err);
    CHECK_INT(slots, 8);
    CHECK_OK(plan_expert_slots(&in, 1000000000, &slots, &err), err);
    CHECK_INT(slots, 100);
    CHECK_ERROR(plan_expert_slots(&in, 3199999, &slots, &err), err, K3_ERR_BUDGET,
                "expert cache budget 3.2 MB is below the floor of 3.2 MB: it holds 7 slots of 400.0 kB, and one "
                "token's top-8 routing needs 8");
}

TEST(presets_table_lists_five_trunk_first_presets_with_full_scale_figures) {
    CHECK_INT(k3_preset_count(), 5);
    static const char *names[5] = {"laptop", "desktop", "workstation", "server", "max"};
    uint64_t last_plan = 0;
    for (int i = 0; i < 5; i++) {
        const k3_preset *p = k3_preset_at(i);
        CHECK(p && !strcmp(p->name, names[i]));
        CHECK(k3_preset_find(names[i]) == p);
        CHECK(p->trunk_bytes >= p->expert_cache_bytes || i == 4); /* trunk first */
        CHECK(p->full_scale_peak_rss > 0 && p->note && p->note[0]);
        /* the plan grows with the budgets and stays within 25% of the measured figure */
        CHECK(p->full_scale_plan > last_plan);
        CHECK(p->full_scale_plan < p->full_scale_peak_rss * 5 / 4 && p->full_scale_plan > p->full_scale_peak_rss * 3 / 4);
        last_plan = p->full_scale_plan;
    }
    CHECK(k3_preset_at(5) == NULL && k3_preset_at(-1) == NULL);
    CHECK(k3_preset_find("auto") == NULL && k3_preset_find("huge") == NULL);
}

TEST(presets_resolve_turns_every_name_into_budgets_and_refuses_any_other_naming_them_all) {
    char detail[1024] = "";
    k3_model_params mp;
    k3_model_params_default(&mp);
    mp.io_threads = 5; /* the rest of mp stays */
    for (int i = 0; i < k3_preset_count(); i++) {
        const k3_preset *p = k3_preset_at(i);
        CHECK_INT(k3_preset_resolve(p->name, NULL, NULL, &mp, detail, sizeof detail), K3_OK);
        CHECK_INT(mp.trunk_bytes, p->trunk_bytes);
        CHECK_INT(mp.expert_cache_bytes, p->expert_cache_bytes);
    }
    CHECK_INT(k3_preset_resolve("mapped", NULL, NULL, &mp, detail, sizeof detail), K3_OK);
    CHECK_INT(mp.trunk_bytes, -1);
    CHECK_INT(mp.expert_cache_bytes, -1);
    /* "auto" is k3_preset_auto for this machine (MemAvailable, here read from K3_MEM_AVAILABLE) */
    setenv("K3_MEM_AVAILABLE", "24000000000", 1);
    k3_model_params sized;
    CHECK_INT(k3_preset_auto(NULL, NULL, 0, &sized, NULL, detail, sizeof detail), K3_OK);
    CHECK_INT(k3_preset_resolve("auto", NULL, NULL, &mp, detail, sizeof detail), K3_OK);
    CHECK_INT(mp.trunk_bytes, sized.trunk_bytes);
    CHECK_INT(mp.expert_cache_bytes, sized.expert_cache_bytes);
    /* below the floor: auto's refusal, mp untouched */
    setenv("K3_MEM_AVAILABLE", "6000000000", 1);
    CHECK_INT(k3_preset_resolve("auto", NULL, NULL, &mp, detail, sizeof detail), K3_ERR_BUDGET);
    unsetenv("K3_MEM_AVAILABLE");
    CHECK(strstr(detail, "below the floor of 2.62 GB"));
    CHECK_INT(mp.trunk_bytes, sized.trunk_bytes);
    CHECK_INT(mp.io_threads, 5);
    CHECK_INT(k3_preset_resolve("huge", NULL, NULL, &mp, detail, sizeof detail), K3_ERR_INVALID_ARGUMENT);
    CHECK_STR(detail, "unknown preset \"huge\": the presets are auto, laptop, desktop, workstation, server, max and mapped");
    CHECK_INT(k3_preset_resolve(NULL, NULL, NULL, &mp, NULL, 0), K3_ERR_INVALID_ARGUMENT);
    CHECK_INT(mp.trunk_bytes, sized.trunk_bytes);
}

TEST(presets_auto_for_the_release_reserves_first_fills_the_trunk_then_the_cache) {
    k3_model_params p;
    k3_plan plan;
    char detail[1024] = "";
    /* the release, derived from its config: k3-architecture §2 */
    CHECK_INT(k3_preset_auto(NULL, NULL, 24000000000ULL, &p, &plan, detail, sizeof detail), K3_OK);
    CHECK_INT(plan.layers, 93);
    CHECK_INT(plan.experts, 92 * 896);
    CHECK_INT(plan.expert_slot_bytes, 17547264);
    CHECK_INT(plan.expert_pool, 17547264ULL * 92 * 896);
    CHECK(plan.dense_weights > 108000000000ULL && plan.dense_weights < 109000000000ULL);
    CHECK_INT(plan.trunk_floor, 2340487168ULL); /* layer 0: KDA + the 33792-wide dense MLP */
    CHECK_INT(plan.cache_floor, 16ULL * 17547264);
    CHECK_INT(plan.kv_cache, 4096ULL * 24 * (512 + 64) * 4);
    /* 24 GB: everything but the cache floor goes to the trunk, within the margin */
    CHECK_INT(p.expert_cache_bytes, (int64_t)plan.cache_floor);
    const uint64_t margin = (1ULL << 30) + 24000000000ULL / 20;
    CHECK(plan.total + margin <= 24000000000ULL);
    CHECK(plan.total + margin + plan.ring_slot_bytes >= 24000000000ULL - 100000000ULL);
    CHECK(plan.fits);
    /* 300 GB: the whole trunk pinned, the expert cache gets the rest */
    CHECK_INT(k3_preset_auto(NULL, NULL, 300000000000ULL, &p, &plan, detail, sizeof detail), K3_OK);
    CHECK_INT(plan.layers_pinned, 93);
    CHECK_INT(plan.ring_slots, 0);
    CHECK_INT(p.trunk_bytes, (int64_t)plan.dense_weights);
    CHECK(p.expert_cache_bytes > 150000000000LL);
}

TEST(presets_auto_refuses_below_the_floor_with_the_numbers) {
    k3_model_params p;
    k3_plan plan;
    char detail[1024] = "";
    CHECK_INT(k3_preset_auto(NULL, NULL, 6000000000ULL, &p, &plan, detail, sizeof detail), K3_ERR_BUDGET);
    CHECK(strstr(detail, "auto preset: 6.00 GB available; after "));
    CHECK(strstr(detail, "below the floor of 2.62 GB (trunk 2.34 GB + expert cache 280.8 MB)"));
}

TEST(presets_full_scale_layouts_match_their_notes) {
    /* the release's layers: 0 is 2.34 GB (KDA + the dense MLP), 68 KDA + MoE layers 1.27 GB,
     * 24 MLA + MoE layers 0.84 GB; pinned largest first, two ring slots when they fit */
    static const struct {
        const char *name;
        int pinned, ring;
        const char *note;
    } want[] = {
        {"laptop", 0, 1, "one ring slot"},
        {"desktop", 9, 2, "9 of 93 layers pinned"},
        {"workstation", 44, 2, "44 of 93 layers pinned"},
        {"server", 93, 0, "all 93 layers pinned"},
        {"max", 93, 0, "all 93 layers pinned"},
    };
    for (int i = 0; i < 5; i++) {
        const k3_preset *p = k3_preset_find(want[i].name);
        k3_model_params mp;
        k3_model_params_default(&mp);
        k3_preset_apply(p, &mp);
        k3_plan plan;
        k3_error err = {0};
        CHECK_OK(presets_release_plan(&mp, NULL, &plan, &err), err);
        CHECK_INT(plan.layers_pinned, want[i].pinned);
        CHECK_INT(plan.ring_slots, want[i].ring);
        CHECK_INT(plan.total, p->full_scale_plan);
        CHECK(plan.trunk <= (uint64_t)p->trunk_bytes && plan.expert_cache <= (uint64_t)p->expert_cache_bytes);
        CHECK(strstr(p->note, want[i].note));
    }
}

/* The release's plan under preset `name` (NULL: mapped) for a context of max_context
 * positions with batch K3_BATCH_AUTO, at MemAvailable `available`; batch -1 when planning
 * failed. */
static k3_plan release_sized_plan(const char *name, int max_context, uint64_t available) {
    k3_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.batch = -1;
    model *m = NULL;
    if (presets_release_model(&m, NULL) != K3_OK)
        return plan;
    k3_model_params mp;
    k3_model_params_default(&mp);
    if (name)
        k3_preset_apply(k3_preset_find(name), &mp);
    k3_context_params cp;
    k3_context_params_default(&cp);
    cp.max_context = max_context;
    cp.batch = K3_BATCH_AUTO;
    if (model_plan(m, &m->inputs, &mp, &cp, available, &plan, NULL) != K3_OK)
        plan.batch = -1;
    model_free(m);
    return plan;
}

TEST(plan_sizes_the_prefill_batch_to_memory_where_the_trunk_streams_and_keeps_the_default_elsewhere) {
    /* laptop streams its trunk: on a 24 GB machine a 2,048-token prompt is one pass. */
    const k3_plan laptop = release_sized_plan("laptop", 4096, 24000000000ull);
    CHECK_INT(laptop.batch_sized, 1);
    CHECK(laptop.ring_slots > 0);
    CHECK(laptop.batch >= 2048 && laptop.batch <= FORWARD_MAX_SIZED_BATCH);
    CHECK(laptop.fits);
    /* What it took stays inside MemAvailable less the margin (1 GiB + 5 %). */
    CHECK(laptop.total + (1ull << 30) + 24000000000ull / 20 <= 24000000000ull);
    CHECK(laptop.batch_token_bytes > 100000 && laptop.batch_token_bytes < 10000000);
    /* At most the context, at most FORWARD_MAX_SIZED_BATCH. */
    CHECK_INT(release_sized_plan("laptop", 600, 24000000000ull).batch, 600);
    CHECK_INT(release_sized_plan("laptop", 65536, 1e12).batch, FORWARD_MAX_SIZED_BATCH);
    /* Less memory, a smaller batch, never below the default (the plan then says whether it fits). */
    const k3_plan tight = release_sized_plan("laptop", 4096, 10000000000ull);
    CHECK(tight.batch > FORWARD_DEFAULT_BATCH && tight.batch < laptop.batch);
    CHECK_INT(release_sized_plan("laptop", 4096, 5000000000ull).batch, FORWARD_DEFAULT_BATCH);
    /* Mapped (nothing streams through the engine) keeps the default. */
    CHECK_INT(release_sized_plan(NULL, 4096, 24000000000ull).batch, FORWARD_DEFAULT_BATCH);
}
