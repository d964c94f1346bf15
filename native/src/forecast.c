/* forecast.c - the machine profile and the per-token forecast (see forecast.h), and the
 * k3_forecast calls of k3.h. */
#include "forecast.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "plan.h"
#include "presets.h"

/* A positive finite number at key of obj, or an error naming it. */
static k3_status positive(const json_value *obj, const char *key, const char *where, const char *path, double *out,
                          k3_error *err) {
    double v;
    if (!json_number(json_get(obj, key), &v) || !(v > 0.0) || !isfinite(v))
        return error_set(err, K3_ERR_FORMAT, "%s: %s%s must be a positive number, found %s", path, where, key,
                         json_type_name(json_type(json_get(obj, key))));
    *out = v;
    return K3_OK;
}

static k3_status read_kind(const json_value *kinds, const char *name, const char *path, forecast_kind *k,
                           k3_error *err) {
    const json_value *v = json_get(kinds, name);
    char where[64];
    snprintf(where, sizeof where, "kinds.%s.", name);
    if (json_type(v) != JSON_OBJECT)
        return error_set(err, K3_ERR_FORMAT, "%s: kinds.%s is %s, expected an object", path, name,
                         json_type_name(json_type(v)));
    k3_status s;
    if ((s = positive(v, "seconds", where, path, &k->seconds, err)) ||
        (s = positive(v, "bytes", where, path, &k->bytes, err)))
        return s;
    if (!json_number(json_get(v, "ffn_seconds"), &k->ffn_seconds) || !(k->ffn_seconds >= 0.0) ||
        k->ffn_seconds > k->seconds)
        return error_set(err, K3_ERR_FORMAT, "%s: kinds.%s.ffn_seconds must be a number from 0 to its seconds (%g)",
                         path, name, k->seconds);
    return K3_OK;
}

/* A curve of {positions, factor} at key (required or not): positions ascending from 1, a
 * factor of at least 1. */
static k3_status read_factors(const json_value *r, const char *key, int required, const char *path, int *positions,
                              double *factors, int *n_out, k3_error *err) {
    const json_value *curve = json_get(r, key);
    *n_out = 0;
    if (!curve && !required)
        return K3_OK;
    const size_t nv = json_len(curve);
    if (json_type(curve) != JSON_ARRAY || nv < 1 || nv > FORECAST_MAX_VERIFY)
        return error_set(err, K3_ERR_FORMAT, "%s: %s must be an array of 1 to %d entries", path, key, FORECAST_MAX_VERIFY);
    for (size_t i = 0; i < nv; i++) {
        const json_value *e = json_at(curve, i);
        int64_t n;
        double g;
        if (!json_int(json_get(e, "positions"), 1, 1024, &n) || !json_number(json_get(e, "factor"), &g) ||
            !(g >= 1.0 && g < 1e4) || (i == 0 ? n != 1 : n <= positions[i - 1]))
            return error_set(err, K3_ERR_FORMAT,
                             "%s: %s[%zu] must be {positions, factor} with positions ascending from 1 and a factor of "
                             "at least 1",
                             path, key, i);
        positions[i] = (int)n;
        factors[i] = g;
    }
    *n_out = (int)nv;
    return K3_OK;
}

k3_status forecast_profile_load(const char *path, forecast_profile *out, k3_error *err) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0)
        return error_set(err, K3_ERR_IO, "machine profile %s cannot be read: run `npm run bench -- scale` (or `k3 "
                                         "bench-scale`) to measure this machine", path);
    if (st.st_size > FORECAST_PROFILE_MAX_BYTES)
        return error_set(err, K3_ERR_FORMAT, "%s: %lld bytes, more than a machine profile's %d", path,
                         (long long)st.st_size, FORECAST_PROFILE_MAX_BYTES);
    json_doc *doc = NULL;
    k3_status s = json_parse_file(path, &doc, err);
    if (s != K3_OK)
        return s;
    const json_value *r = json_root(doc);
    int64_t version = 0, n_threads = 0, io_threads = 0;
    if (!json_string_is(json_get(r, "format"), "k3-machine-profile") || !json_int(json_get(r, "version"), 3, 3, &version))
        s = error_set(err, K3_ERR_FORMAT,
                      "%s is not a k3 machine profile of version 3 (format, version): run `npm run bench -- scale` "
                      "to measure this machine again", path);
    else if (!json_int(json_get(r, "threads"), 1, 1024, &n_threads) ||
             !json_int(json_get(r, "io_threads"), 1, 64, &io_threads))
        s = error_set(err, K3_ERR_FORMAT, "%s: threads must be 1..1024 and io_threads 1..64", path);
    if (s == K3_OK) {
        out->threads = (int)n_threads;
        out->io_threads = (int)io_threads;
        const char *src = json_string(json_get(r, "source"), NULL);
        snprintf(out->source, sizeof out->source, "%s", src ? src : "");
        const json_value *kinds = json_get(r, "kinds");
        if ((s = positive(r, "memory_bandwidth", "", path, &out->memory_bandwidth, err)) ||
            (s = positive(r, "disk_sequential", "", path, &out->disk_sequential, err)) ||
            (s = positive(r, "disk_expert", "", path, &out->disk_expert, err)) ||
            (s = positive(r, "memory_bandwidth_reading", "", path, &out->memory_bandwidth_reading, err)) ||
            (s = read_kind(kinds, "dense", path, &out->dense, err)) ||
            (s = read_kind(kinds, "kda_moe", path, &out->kda_moe, err)) ||
            (s = read_kind(kinds, "mla_moe", path, &out->mla_moe, err)) ||
            (s = read_kind(kinds, "lm_head", path, &out->lm_head, err))) {
        }
    }
    if (s == K3_OK)
        s = read_factors(r, "verify", 1, path, out->verify_positions, out->verify_factor, &out->n_verify, err);
    if (s == K3_OK)
        s = read_factors(r, "prefill_factor", 0, path, out->prefill_factor_positions, out->prefill_factor_values,
                         &out->n_prefill_factor, err);
    const json_value *concurrency = json_get(r, "disk_concurrency");
    if (s == K3_OK && concurrency) {
        if (!json_number(concurrency, &out->disk_concurrency))
            s = error_set(err, K3_ERR_FORMAT, "%s: disk_concurrency must be a number from 0.1 to 10, found %s", path,
                          json_type_name(json_type(concurrency)));
        else if (!(out->disk_concurrency >= 0.1 && out->disk_concurrency <= 10.0))
            s = error_set(err, K3_ERR_FORMAT, "%s: disk_concurrency must be a number from 0.1 to 10, found %g", path,
                          out->disk_concurrency);
    }
    const json_value *check = json_get(r, "check");
    int64_t configurations = 0, within = 0;
    double worst = 0.0;
    if (s == K3_OK && check &&
        (json_type(check) != JSON_OBJECT || !json_int(json_get(check, "configurations"), 1, 64, &configurations) ||
         !json_int(json_get(check, "within"), 0, configurations, &within) ||
         !json_number(json_get(check, "worst"), &worst) || !(worst >= 0.0 && worst < 1e3)))
        s = error_set(err, K3_ERR_FORMAT,
                      "%s: check must be {configurations: 1..64, within: 0..configurations, worst: a number from 0 "
                      "to 1000}",
                      path);
    out->check_configurations = (int)configurations;
    out->check_within = (int)within;
    out->check_worst = worst;
    json_free(doc);
    return s;
}

/* A factor curve at n: linear between measured counts, and beyond the last along the last
 * measured step's slope. */
static double curve_at(const int *positions, const double *factors, int k, int n) {
    if (n <= 1 || k == 1)
        return n <= 1 ? 1.0 : factors[0];
    for (int i = 1; i < k; i++)
        if (n <= positions[i]) {
            const double t = (double)(n - positions[i - 1]) / (double)(positions[i] - positions[i - 1]);
            return factors[i - 1] + t * (factors[i] - factors[i - 1]);
        }
    const double slope = (factors[k - 1] - factors[k - 2]) / (double)(positions[k - 1] - positions[k - 2]);
    return factors[k - 1] + slope * (double)(n - positions[k - 1]);
}

/* g(n) for a verify pass, g'(n) for a prompt's (the verify curve where g' was not measured). */
static double verify_factor(const forecast_profile *p, int n, int prefill) {
    if (prefill && p->n_prefill_factor)
        return curve_at(p->prefill_factor_positions, p->prefill_factor_values, p->n_prefill_factor, n);
    return curve_at(p->verify_positions, p->verify_factor, p->n_verify, n);
}

/* The share of requests an LRU cache of `slots` serves when every pass asks, in each MoE
 * layer, for a share q of that layer's experts chosen evenly at random (`pool` experts in
 * all). An expert last asked for j passes ago is still cached when the distinct experts
 * asked for since number fewer than the slots: about pool x (1 - (1 - q)^j) for a window of
 * j passes, the layers taking turns in the same order every pass. So the cache serves the
 * experts asked for within the last J passes, J the longest window that fits: 1 - (1 - q)^J.
 * A cache smaller than one pass's experts serves none (each pass evicts the last before it
 * comes round again), where a random order of requests would let it keep its share. */
double lru_hit_rate(double slots, double pool, double q) {
    if (pool <= 0.0 || slots >= pool)
        return 1.0;
    if (q <= 0.0)
        return 0.0;
    if (q >= 1.0)
        return 0.0; /* every expert every pass, and they do not all fit */
    /* The largest j with pool (1 - (1 - q)^j) <= slots; (1 - q)^j falls as j grows. */
    const double j = floor(log(1.0 - slots / pool) / log(1.0 - q) + 1e-9);
    return j < 1.0 ? 0.0 : 1.0 - pow(1.0 - q, j);
}

/* How much slower a pass computes while the disk reads beside it: the triad alone over the
 * triad beside reads, never below 1. */
static double compute_slowdown(const forecast_profile *p) {
    const double m = p->memory_bandwidth / p->memory_bandwidth_reading;
    return m > 1.0 ? m : 1.0;
}

/* `compute` seconds of resident work done beside `reads` seconds of disk reads that start
 * with it: while the reads last it runs at 1 / m of its speed, after them at full speed. A
 * decode pass's reads outlast its compute, so all of it slows by m; a prefill pass's reads
 * (6 s of a 45-196 s pass on the slice) slow only what runs beside them. */
static double compute_beside_reads(double compute, double reads, double m) {
    if (reads <= 0.0 || m <= 1.0)
        return compute;
    return compute * m <= reads ? compute * m : compute + reads * (1.0 - 1.0 / m);
}

/* One pass of `positions` positions. prefill: the routed experts compute every (token,
 * expert) pair, the first of each expert at its bytes' cost and the rest at the marginal
 * cost of a position (g(n) - 1) / (n - 1); a verify pass counts each distinct expert once.
 * logit_rows: rows through the lm_head, or negative for every position (g(n), as a verify
 * pass); a prefill computes only its last token's (decode.c), 1 in its last pass, else 0. */
static k3_status forecast_pass(const forecast_profile *p, const model *m, const k3_model_params *mp,
                               const k3_plan *plan, int positions, double hit_rate, int prefill, int logit_rows,
                               k3_forecast *out, k3_error *err) {
    memset(out, 0, sizeof *out);
    if (plan->trunk_mapped || plan->experts_mapped)
        return error_set(err, K3_ERR_INVALID_ARGUMENT,
                         "forecast: the %s mapped, so the page cache decides what stays in memory; a forecast needs "
                         "owned budgets (a preset, or --trunk-gb and --cache-gb)",
                         plan->trunk_mapped ? "trunk is" : "experts are");
    const plan_inputs *in = &m->inputs;
    const k3_config *c = &m->config;
    trunk_layout tl;
    k3_status s = plan_trunk_layout(in, (uint64_t)mp->trunk_bytes, &tl, err);
    if (s != K3_OK)
        return s;
    const double g = verify_factor(p, positions, prefill);
    const double E = (double)c->num_experts, k = (double)c->num_experts_per_token;
    const double distinct = E > 0 ? E * (1.0 - pow(1.0 - k / E, positions)) : 0.0;
    const double marginal = positions > 1 ? (g - 1.0) / (double)(positions - 1) : 0.0;
    /* Expert computations in bytes' worth of one-token work. */
    const double expert_work = prefill ? distinct + (k * positions - distinct) * marginal : distinct;
    const double expert_bytes = (double)in->expert_slot_bytes;
    const double hit = hit_rate >= 0.0 ? fmin(hit_rate, 1.0)
                                       : lru_hit_rate((double)plan->expert_slots, (double)plan->experts,
                                                      E > 0 ? distinct / E : 0.0);
    double compute = 0.0, expert_read = 0.0, streamed = 0.0;
    double f_layer[K3_CONFIG_MAX_LAYERS], e_layer[K3_CONFIG_MAX_LAYERS];
    for (int l = 0; l < in->n_layers; l++) {
        const int moe = c->layer_is_moe[l];
        const forecast_kind *kind = !moe ? &p->dense : c->layer_is_kda[l] ? &p->kda_moe : &p->mla_moe;
        const double per_byte = kind->seconds / kind->bytes;
        const double experts = moe ? distinct : 0.0;
        const double c_l = per_byte * ((double)in->layer_bytes[l] * g + (moe ? expert_work : 0.0) * expert_bytes);
        f_layer[l] = c_l * kind->ffn_seconds / kind->seconds;
        e_layer[l] = experts * (1.0 - hit) * expert_bytes / p->disk_expert;
        compute += c_l;
        expert_read += e_layer[l];
        if (!tl.pinned[l])
            streamed += (double)in->layer_bytes[l];
        out->expert_read_bytes += experts * (1.0 - hit) * expert_bytes;
    }
    compute += p->lm_head.seconds / p->lm_head.bytes * (double)in->lm_head_bytes * (logit_rows < 0 ? g : logit_rows);
    const double trunk_read = streamed / p->disk_sequential;
    /* A pass computes beside its reads on what they leave of the machine, for as long as
     * they last: with one ring slot only the expert reads run beside compute (the trunk's
     * are in series with it), with two both kinds do, sharing the device as below. */
    const int both = streamed > 0.0 && out->expert_read_bytes > 0.0 && p->disk_concurrency > 0.0;
    const double beside = tl.ring_slots == 1 ? expert_read : (trunk_read + expert_read) / (both ? p->disk_concurrency : 1.0);
    const double slowed = compute_beside_reads(compute, beside, compute_slowdown(p));
    const double slowdown = compute > 0.0 ? slowed / compute : 1.0;
    compute = slowed;
    double exposed = 0.0;
    for (int l = 0; l < in->n_layers; l++)
        exposed += e_layer[l] > slowdown * f_layer[l] ? e_layer[l] - slowdown * f_layer[l] : 0.0;
    out->positions = positions;
    out->compute_seconds = compute;
    out->disk_seconds = trunk_read + expert_read;
    out->exposed_expert_seconds = exposed;
    out->trunk_read_bytes = streamed;
    out->expert_hit_rate = hit;
    out->check_configurations = p->check_configurations;
    out->check_within = p->check_within;
    out->check_worst = p->check_worst;
    if (tl.ring_slots == 1) {
        out->seconds = compute + trunk_read + exposed;
        out->bound = trunk_read + exposed > compute;
    } else {
        /* Both kinds at once share the device: each byte its own kind's time, scaled by
         * what reading both at once measured against that. */
        const double disk = beside;
        const double busy = compute + exposed;
        out->disk_seconds = disk;
        out->seconds = busy > disk ? busy : disk;
        out->bound = disk > busy;
    }
    return K3_OK;
}

k3_status forecast_make(const forecast_profile *p, const model *m, const k3_model_params *mp, const k3_plan *plan,
                        int positions, double hit_rate, k3_forecast *out, k3_error *err) {
    if (positions < 1 || positions > 1024) {
        memset(out, 0, sizeof *out);
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "forecast: %d positions (1..1024)", positions);
    }
    return forecast_pass(p, m, mp, plan, positions, hit_rate, 0, -1, out, err);
}

k3_status forecast_prefill(const forecast_profile *p, const model *m, const k3_model_params *mp, const k3_plan *plan,
                           int tokens, int batch, double hit_rate, k3_prefill_forecast *out, k3_error *err) {
    memset(out, 0, sizeof *out);
    if (tokens < 1 || tokens > (1 << 20) || batch < 1)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "prefill forecast: %d tokens (1..%d) in batches of %d (>= 1)",
                         tokens, 1 << 20, batch);
    out->tokens = tokens;
    out->batch = batch;
    out->passes = (tokens + batch - 1) / batch;
    /* The full passes cost the same but for the last pass's one row of logits; a short last
     * pass takes what remains. */
    const int full = tokens / batch, rest = tokens % batch;
    const int sizes[3] = {batch, batch, rest}, rows[3] = {0, 1, 1};
    const int counts[3] = {rest ? full : full - 1, rest ? 0 : 1, rest ? 1 : 0};
    for (int i = 0; i < 3; i++) {
        const int n = sizes[i], count = counts[i];
        if (count == 0)
            continue;
        k3_forecast pass;
        const k3_status s = forecast_pass(p, m, mp, plan, n, hit_rate, 1, rows[i], &pass, err);
        if (s != K3_OK)
            return s;
        out->seconds += count * pass.seconds;
        out->compute_seconds += count * pass.compute_seconds;
        out->disk_seconds += count * pass.disk_seconds;
        out->trunk_read_bytes += count * pass.trunk_read_bytes;
        out->expert_read_bytes += count * pass.expert_read_bytes;
        out->bound |= pass.bound;
        out->check_configurations = pass.check_configurations;
        out->check_within = pass.check_within;
        out->check_worst = pass.check_worst;
    }
    return K3_OK;
}

k3_status k3_forecast_profile_path(char *out, size_t size) {
    const char *env = getenv("K3_MACHINE_PROFILE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env)
        n = snprintf(out, size, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(out, size, "%s/k3/machine-profile.json", xdg);
    else if (home && *home)
        n = snprintf(out, size, "%s/.cache/k3/machine-profile.json", home);
    else
        return K3_ERR_INVALID_ARGUMENT;
    return n >= 0 && (size_t)n < size ? K3_OK : K3_ERR_INVALID_ARGUMENT;
}

/* What both public forecasts start from, checked: the budgets, the hit rate, the machine
 * profile (the one given, else the default path's) and the model surveyed (the folder, else
 * the release's shape). On success *m is the caller's to free. */
static k3_status forecast_inputs(const char *profile, const char *dir, const k3_model_params *mp, double expert_hit_rate,
                                 forecast_profile *p, model **m, k3_error *err) {
    char path[4096];
    if (!mp)
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "forecast: no budgets given (a mapped model has no forecast)");
    if (!(expert_hit_rate <= 1.0)) /* NaN too */
        return error_set(err, K3_ERR_INVALID_ARGUMENT, "forecast: an expert hit rate of %g (0..1, or negative for the assumed one)",
                         expert_hit_rate);
    if (!profile) {
        if (k3_forecast_profile_path(path, sizeof path) != K3_OK)
            return error_set(err, K3_ERR_INVALID_ARGUMENT,
                             "no machine profile: set K3_MACHINE_PROFILE, or HOME for ~/.cache/k3/machine-profile.json");
        profile = path;
    }
    const k3_status s = forecast_profile_load(profile, p, err);
    if (s != K3_OK)
        return s;
    return dir ? model_survey(dir, mp, m, err) : presets_release_model(m, err);
}

k3_status k3_forecast_make(const char *profile, const char *dir, const k3_model_params *mp, int positions,
                           k3_forecast *out, char *detail, size_t detail_size) {
    return k3_forecast_make_at_hit_rate(profile, dir, mp, positions, -1.0, out, detail, detail_size);
}

k3_status k3_forecast_prefill(const char *profile, const char *dir, const k3_model_params *mp, int tokens, int batch,
                              double expert_hit_rate, k3_prefill_forecast *out, char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    forecast_profile p;
    model *m = NULL;
    k3_plan plan;
    memset(out, 0, sizeof *out);
    k3_status s = batch < 0 ? error_set(&err, K3_ERR_INVALID_ARGUMENT, "prefill forecast: batch %d (K3_BATCH_AUTO, or at least 1)", batch)
                            : forecast_inputs(profile, dir, mp, expert_hit_rate, &p, &m, &err);
    if (s == K3_OK) {
        /* The batch a context for the prompt and a reply would get on this machine. */
        k3_context_params cp;
        k3_context_params_default(&cp);
        if (cp.max_context < tokens + 1)
            cp.max_context = tokens + 1;
        cp.batch = batch;
        s = model_plan(m, &m->inputs, mp, &cp, 0, &plan, &err);
    }
    if (s == K3_OK)
        s = forecast_prefill(&p, m, mp, &plan, tokens, plan.batch, expert_hit_rate, out, &err);
    model_free(m);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    return s;
}

k3_status k3_forecast_make_at_hit_rate(const char *profile, const char *dir, const k3_model_params *mp,
                                       int positions, double expert_hit_rate, k3_forecast *out, char *detail,
                                       size_t detail_size) {
    k3_error err = {K3_OK, ""};
    forecast_profile p;
    model *m = NULL;
    k3_plan plan;
    memset(out, 0, sizeof *out);
    k3_status s = forecast_inputs(profile, dir, mp, expert_hit_rate, &p, &m, &err);
    if (s == K3_OK)
        s = model_plan(m, &m->inputs, mp, NULL, 1, &plan, &err);
    if (s == K3_OK)
        s = forecast_make(&p, m, mp, &plan, positions, expert_hit_rate, out, &err);
    model_free(m);
    if (s != K3_OK)
        error_copy_detail(&err, detail, detail_size);
    return s;
}
